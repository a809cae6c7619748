package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/aimi-tools/swarm/acpmsg"
	"github.com/aimi-tools/swarm/engine"
	"github.com/aimi-tools/swarm/internal/logcursor"
	"github.com/aimi-tools/swarm/state"
	"github.com/aimi-tools/swarm/tasks"
)

// ledger is a swarm's state.Recorder as the supervisors use it. It exists
// because the Recorder cannot forget a container: Cleanup (dropping entries)
// and Resume --retry-failed (a fresh fold for a rerun) close it and open a
// new one, under the write lock, while supervisors keep calling through the
// read lock.
type ledger struct {
	store *state.Store
	mu    sync.RWMutex
	rec   *state.Recorder
	opts  state.RecorderOptions
}

// lineResult is what one container line did.
type lineResult struct {
	msg      *acpmsg.Message // the valid message, folded or rejected
	invalid  string          // why the line is not a valid message
	rejected string          // why the fold refused the valid message
	code     string          // set when the refusal fails the container (state.RejectedError.Code)
}

func newLedger(store *state.Store, sw *state.Swarm, opts state.RecorderOptions) *ledger {
	return &ledger{store: store, rec: state.NewRecorder(store, sw, opts), opts: opts}
}

// track adds a container with its fold.
func (l *ledger) track(c *state.Container, t *state.Tracker) error {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.rec.Track(c, t)
}

// line journals one line read from a container and folds it when valid.
func (l *ledger) line(ctx context.Context, name string, ln engine.Line) (lineResult, error) {
	// Every line is journaled as it comes: the reader (container.Lines,
	// resumed from the journal's Position) is the one layer that drops
	// lines read twice.
	rec := state.Record{Cursor: ln.Cursor, Stream: streamName(ln.Stream)}
	var res lineResult
	var msg *acpmsg.Message
	switch {
	case ln.Err != nil:
		res.invalid = ln.Err.Error()
		rec.SetRaw(truncateRaw(ln.Data))
	case ln.Stream == engine.Stderr:
		// The protocol is stdout only; stderr is the runner's log. It is
		// journaled as it came, never parsed as a message, and without a
		// reason: the stream says what it is, and a reason on every line
		// of a chatty runner made its journal three times its output.
		rec.SetRaw(ln.Data)
		return res, l.record(ctx, name, rec, nil, &res)
	default:
		m, err := acpmsg.ParseFromContainer(ln.Data)
		if err != nil {
			res.invalid = oneLine(err.Error())
			rec.SetRaw(ln.Data)
		} else {
			msg = &m
			res.msg = msg
		}
	}
	rec.Reason = res.invalid
	return res, l.record(ctx, name, rec, msg, &res)
}

// stderrReason marked a journaled stderr line in journals of earlier
// versions: log output, not a message.
const stderrReason = "stderr: log output, not a protocol message"

func (l *ledger) record(ctx context.Context, name string, rec state.Record, msg *acpmsg.Message, res *lineResult) error {
	l.mu.RLock()
	err := l.rec.Record(ctx, name, rec, msg)
	l.mu.RUnlock()
	var re *state.RejectedError
	if errors.As(err, &re) {
		res.rejected, res.code = re.Reason, re.Code
		err = nil
	}
	return err
}

// truncateRaw keeps the journal of an oversized line bounded: its first
// KiB is enough to tell what it was.
func truncateRaw(b []byte) []byte {
	const keep = 1024
	if len(b) > keep {
		return b[:keep]
	}
	return b
}

func streamName(s engine.Stream) string {
	if s == engine.Stderr {
		return state.StreamStderr
	}
	return state.StreamStdout
}

// daemon journals (and folds) a message the daemon sent or decided.
func (l *ledger) daemon(ctx context.Context, name string, m acpmsg.Message) (rejected string, err error) {
	return l.daemonNote(ctx, name, m, "")
}

// daemonNote is daemon with a note in the record's reason.
func (l *ledger) daemonNote(ctx context.Context, name string, m acpmsg.Message, note string) (rejected string, err error) {
	l.mu.RLock()
	err = l.rec.Record(ctx, name, state.Record{Stream: state.StreamDaemon, Valid: true, Reason: note}, &m)
	l.mu.RUnlock()
	var re *state.RejectedError
	if errors.As(err, &re) {
		return re.Reason, nil
	}
	return "", err
}

// note journals a daemon record that carries no message.
func (l *ledger) note(ctx context.Context, name string, rec state.Record) error {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.rec.Record(ctx, name, rec, nil)
}

func (l *ledger) update(name string, fn func(*state.Container)) error {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.rec.UpdateContainer(name, fn)
}

func (l *ledger) snapshot() *state.Swarm {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.rec.Snapshot()
}

func (l *ledger) container(name string) *state.Container {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.rec.Container(name)
}

func (l *ledger) status(name string) state.ContainerStatus {
	if c := l.container(name); c != nil {
		return c.Status
	}
	return ""
}

func (l *ledger) stories(name string) map[string]tasks.Status {
	l.mu.RLock()
	defer l.mu.RUnlock()
	s, _ := l.rec.Stories(name)
	return s
}

// position is where the container's journal ends on each output stream,
// for Lines(after=...).
func (l *ledger) position(name string) logcursor.Position {
	l.mu.RLock()
	defer l.mu.RUnlock()
	pos, _ := l.rec.Position(name)
	return pos.Position
}

// saveErr is the error of the recorder's last state save, nil once one
// succeeded.
func (l *ledger) saveErr() error {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.rec.Err()
}

func (l *ledger) flush(ctx context.Context) error {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.rec.Flush(ctx)
}

func (l *ledger) close(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.rec.Close(ctx)
}

// rebuild closes the Recorder, lets fix change the files (drop state
// entries, move journals aside), and opens a new Recorder tracking keep,
// each restored from its journal.
func (l *ledger) rebuild(ctx context.Context, fix func(ctx context.Context) error, keep []*ctr, restore func(c *ctr, old *state.Container) (*state.Container, *state.Tracker, error)) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	before := l.rec.Snapshot()
	if err := l.rec.Close(ctx); err != nil {
		return fmt.Errorf("flush state before changing it: %w", err)
	}
	ferr := fix(ctx)
	sw, err := l.store.Load(ctx)
	if err != nil {
		return errors.Join(ferr, fmt.Errorf("reload state: %w", err))
	}
	// The Recorder re-adds what it tracks; start from the file's header.
	fresh := &state.Swarm{SwarmID: sw.SwarmID, CreatedAt: sw.CreatedAt, UpdatedAt: time.Now().UTC()}
	l.rec = state.NewRecorder(l.store, fresh, l.opts)
	for _, c := range keep {
		sc, t, err := restore(c, before.Container(c.name))
		if err != nil {
			return errors.Join(ferr, err)
		}
		if err := l.rec.Track(sc, t); err != nil {
			return errors.Join(ferr, err)
		}
	}
	return ferr
}

// runSuffix follows a journal's name when a rerun moved it aside.
const runSuffix = ".run-"

// moveAside renames a journal so a rerun starts a fresh fold; the old run's
// records stay readable next to it.
func moveAside(path string) error {
	err := os.Rename(path, path+runSuffix+time.Now().UTC().Format("20060102T150405.000000000Z"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("move journal %s aside: %w", path, err)
	}
	return nil
}
