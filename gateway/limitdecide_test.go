package gateway

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/aimi-tools/swarm/contract"
)

// TestLimitedAnswerIsDecidedOnce: a 429 that names no reset gets a
// jittered backoff; the Observer is told the very reset the limiter holds
// the account's calls to and the runner's limits query answers, and
// where it came from ("backoff").
func TestLimitedAnswerIsDecidedOnce(t *testing.T) {
	f := newFixture(t, Limits{})
	upSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusTooManyRequests)
		io.WriteString(w, `{"type":"error","error":{"type":"rate_limit_error"}}`)
	}))
	t.Cleanup(upSrv.Close)
	a := f.s.providers["anthropic"]
	a.URL, _ = ParseURL(upSrv.URL)
	f.s.providers["anthropic"] = a
	g, err := f.s.Grant(contract.Sandbox{Swarm: "sw1", Container: "aimi-a"}, "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	c := f.client("127.0.0.1")
	resp := post(t, c, g.Env["ANTHROPIC_BASE_URL"], g.Env["ANTHROPIC_API_KEY"], `{}`)
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("call: %d, want the provider's 429", resp.StatusCode)
	}
	held := f.s.limiter.resetOf("anthropic", "ANTHROPIC_API_KEY")
	calls := f.rec.waitCalls(t, 1)
	if len(calls) != 1 || calls[0].Limit == nil || calls[0].Limit.Source != "backoff" || !calls[0].Limit.Until.Equal(held) {
		t.Fatalf("the Observer saw %+v; want one call limited until %v (the limiter's hold) from backoff", calls, held)
	}
	st, ans := limitsOf(t, c, g, g.Env["ANTHROPIC_API_KEY"])
	if st != http.StatusOK || len(ans.Limits) != 1 || !ans.Limits[0].Until.Equal(held) {
		t.Errorf("limits query: %d %+v, want the limiter's hold %v", st, ans, held)
	}
}
