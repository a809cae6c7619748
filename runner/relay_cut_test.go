package runner

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestRelayNotesAnAnswerThatBreaksOff: an upstream that sends its headers
// and part of a body, then drops the connection, is the service being
// away (the clone is tried again), not a refusal. The reverse proxy calls
// no ErrorHandler for it, so without the note the session saw nothing.
func TestRelayNotesAnAnswerThatBreaksOff(t *testing.T) {
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Length", "100000")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(make([]byte, 1000))
		w.(http.Flusher).Flush()
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close()
		}
	}))
	defer upstream.Close()
	r, err := newRelay(upstream.URL+"/repo.git", "", "", nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer r.close()
	u, end, err := r.begin()
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(u + "/git-upload-pack")
	if err == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	if s := end(); s.upstreamErr == nil {
		t.Fatal("an answer cut after its headers left no note: the clone would fail for good instead of being tried again")
	}
}
