package board

import (
	"net/http"
	"strings"
	"testing"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/state"
)

func TestSummarizeShowsAGapRecordAsAGap(t *testing.T) {
	rec := state.Record{Seq: 9, Stream: state.StreamDaemon, Omitted: &state.Omission{Lines: 3, Bytes: 200},
		Reason: "3 lines (200 bytes) of output not journaled: the journal is at its cap"}
	l := summarize(rec)
	if l.Kind != "gap" || l.Text != rec.Reason || l.Note != "" {
		t.Fatalf("summarized as %+v, want kind gap with the reason as text", l)
	}
}

// withHeader adds a header to every request of a client.
type withHeader struct {
	k, v string
	rt   http.RoundTripper
}

func (h withHeader) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set(h.k, h.v)
	return h.rt.RoundTrip(r)
}

// TestJournalViewAsksForABoundedPage: the view asks the daemon for the
// journal's last page only (after the last line shown, on a reconnect), and
// says how many earlier records it left out.
func TestJournalViewAsksForABoundedPage(t *testing.T) {
	f := &fakeDaemon{records: []state.Record{
		{Seq: 5001, Stream: state.StreamStderr, Raw: "late"},
		{Seq: 5002, Stream: state.StreamStderr, Raw: "later"},
	}}
	base, _ := serveBoard(t, f)
	c := session(t, base)
	evs := readEvents(t, c, base+"/api/journal?repo=/r&name=aimi-a", 4)
	if len(evs) != 4 || evs[0].id != "" || !strings.Contains(evs[0].data, `"kind":"gap","text":"5000 earlier records not shown`) ||
		evs[1].id != "5001" || evs[3].name != "end" {
		t.Fatalf("events %+v, want a note on 5000 earlier records, two lines and the end", evs)
	}
	if want := (api.LogsRequest{RepoPath: "/r", Name: "aimi-a", Follow: true, Tail: journalPage}); f.logsReq != want {
		t.Fatalf("asked the daemon for %+v, want %+v", f.logsReq, want)
	}

	c.Transport = withHeader{"Last-Event-ID", "4990", c.Transport}
	evs = readEvents(t, c, base+"/api/journal?repo=/r&name=aimi-a", 4)
	if f.logsReq.AfterSeq != 4990 || f.logsReq.Tail != journalPage {
		t.Fatalf("a reconnect asked for %+v, want the page after seq 4990", f.logsReq)
	}
	if len(evs) != 4 || !strings.Contains(evs[0].data, "10 earlier records not shown") {
		t.Fatalf("events %+v, want a note on the 10 records between the page and the last line shown", evs)
	}
}
