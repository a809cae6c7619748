package board

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/internal/browsertest"
)

// otherPort is a server another local user runs on another loopback port:
// it records every request the board's user's browser sends it, and its
// page tries to stop a container on the board from the browser.
type otherPort struct {
	mu   sync.Mutex
	seen []*http.Request
}

func (o *otherPort) requests() []*http.Request {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]*http.Request(nil), o.seen...)
}

// otherPage posts to the board with whatever the browser attaches by
// itself (no-cors: no preflight, no custom header), then marks itself done.
const otherPage = `<!doctype html><title>other</title><body><script>
fetch(BOARD + '/api/stop', {method: 'POST', mode: 'no-cors', credentials: 'include',
  headers: {'Content-Type': 'text/plain'}, body: '{"repo":"/home/dev/web","names":["aimi-web"]}'})
  .catch(() => {}).finally(() => { const d = document.createElement('p'); d.id = 'done'; document.body.appendChild(d); });
</script></body>`

func (o *otherPort) serve(board string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		o.mu.Lock()
		o.seen = append(o.seen, r.Clone(context.Background()))
		o.mu.Unlock()
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write([]byte(strings.Replace(otherPage, "BOARD", `"`+board+`"`, 1)))
	})
}

// TestTheCredentialNeverReachesAnotherPort: the board's user opens the
// board in Chromium, then a page another local user serves on another
// loopback port. That server must receive nothing of the board's
// credential, and whatever it did receive, replayed to the board as an
// action (every header, every value as the token header), is refused and
// stops nothing; so is what its page sends from the browser.
func TestTheCredentialNeverReachesAnotherPort(t *testing.T) {
	f := &fakeDaemon{events: make(chan api.Event), list: fakeSwarm()}
	base, _ := serveBoard(t, f)
	other := &otherPort{}
	op := httptest.NewServer(other.serve(base))
	t.Cleanup(op.Close)

	actx, _ := browsertest.Start(t)
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	ctx, cancelT := context.WithTimeout(ctx, 90*time.Second)
	defer cancelT()
	if err := chromedp.Do(ctx, chromedp.Navigate(openURL(base)),
		chromedp.WaitVisible(chromedp.CSS(`#conn[data-state="live"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-container="aimi-web"]`))); err != nil {
		t.Fatalf("open the board: %v", err)
	}
	// The same tab goes on to the other port, then a second page there.
	if err := chromedp.Do(ctx, chromedp.Navigate(op.URL+"/"), chromedp.WaitReady(chromedp.CSS(`#done`)),
		chromedp.Navigate(op.URL+"/again?x=1"), chromedp.WaitReady(chromedp.CSS(`#done`))); err != nil {
		t.Fatalf("visit the other port: %v", err)
	}
	seen := other.requests()
	if len(seen) < 2 {
		t.Fatalf("the other port saw %d requests, want the two visits", len(seen))
	}
	var candidates []string
	for _, r := range seen {
		for k, vs := range r.Header {
			for _, v := range vs {
				if strings.Contains(v, testToken) || k == "Cookie" {
					t.Errorf("the other port received %s: %q with %s %s", k, v, r.Method, r.URL)
				}
				candidates = append(candidates, v)
			}
		}
		for _, c := range r.Cookies() {
			candidates = append(candidates, c.Value)
		}
		for _, vs := range r.URL.Query() {
			candidates = append(candidates, vs...)
		}
	}
	// Replay: everything the other port got, as a stop on the board.
	slices.Sort(candidates)
	candidates = slices.Compact(append(candidates, ""))
	for _, r := range seen {
		for _, tok := range candidates {
			req, _ := http.NewRequest("POST", base+"/api/stop", strings.NewReader(`{"repo":"/home/dev/web","names":["aimi-web"]}`))
			for k, vs := range r.Header {
				req.Header[k] = vs
			}
			req.Header.Del("Origin")
			req.Header.Del("Sec-Fetch-Site")
			req.Header.Set("Content-Type", "application/json")
			if tok != "" {
				req.Header.Set(TokenHeader, tok)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusForbidden {
				t.Fatalf("a stop replaying what the other port got (token header %.12q…): %d, want 403", tok, resp.StatusCode)
			}
		}
	}
	f.mu.Lock()
	stopped := f.stopped
	f.mu.Unlock()
	for _, c := range f.Calls() {
		if c == "stop" {
			t.Fatalf("the daemon was asked to stop %v by what another port got", stopped)
		}
	}
}
