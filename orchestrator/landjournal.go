package orchestrator

import (
	"cmp"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/state"
)

// maxLandNote bounds one land journal record's text (reasons quote
// what an agent or git said).
const maxLandNote = 2000

// journalLand appends one record to the swarm's land journal (`aimi swarm
// logs land`); a record that cannot be written is logged, the land goes
// on. Callers hold the swarm's one land (sw.landing), so records are
// written one at a time.
func (sw *swarm) journalLand(format string, args ...any) {
	text := oneLine(fmt.Sprintf(format, args...))
	if len(text) > maxLandNote {
		text = text[:maxLandNote]
	}
	if err := sw.appendLand(text); err != nil {
		sw.m.log.Warn("land: the land journal was not written", "swarm", sw.id, "err", err)
	}
}

func (sw *swarm) appendLand(text string) error {
	path := sw.store.LandJournalPath(sw.id)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	sw.mu.Lock()
	if sw.landSeq == 0 {
		if last, err := state.LastPosition(path); err == nil {
			sw.landSeq = last.Seq
		}
	}
	sw.landSeq++
	seq := sw.landSeq
	sw.mu.Unlock()
	b, err := json.Marshal(state.Record{Seq: seq, Time: time.Now().UTC(), Stream: state.StreamDaemon, Type: state.TypeLand, Reason: text})
	if err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(append(b, '\n'))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// journalResult journals one branch's outcome.
func (sw *swarm) journalResult(r api.LandResult) {
	switch {
	case r.Outcome == api.LandFixing || r.Outcome == api.LandVerifying:
		sw.journalLand("%s: %s in %s", r.Container, r.Outcome, r.Fixup)
	case r.Merge != "":
		sw.journalLand("%s: %s as merge %.12s (verify: %s)", r.Container, r.Outcome, r.Merge, cmp.Or(r.Verify, "-"))
	default:
		sw.journalLand("%s: %s: %s", r.Container, r.Outcome, r.Reason)
	}
}
