package gateway

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/contract"
)

// limitsOf asks the gateway, as a container's runner does, which limits
// its calls met.
func limitsOf(t *testing.T, c *http.Client, g Grant, key string) (int, contract.GatewayLimits) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, strings.TrimSuffix(g.Env[contract.EnvGatewayURL], "/")+contract.GatewayLimitsPath, nil)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var ans contract.GatewayLimits
	if resp.StatusCode == http.StatusOK {
		if err := json.NewDecoder(resp.Body).Decode(&ans); err != nil {
			t.Fatal(err)
		}
	}
	return resp.StatusCode, ans
}

// TestContainerLearnsTheLimitItsCallsMet: a container's call gets the
// provider's 429; the limits query authenticated by its placeholder says
// which provider, when it hit and until when. Another container of the
// same account learns the limit in force (no hit of its own); a query
// without a placeholder of the container is refused, and revoking its
// access forgets what it met.
func TestContainerLearnsTheLimitItsCallsMet(t *testing.T) {
	f := newFixture(t, Limits{})
	up := &limitedUpstream{retryAfter: "30"}
	upSrv := httptest.NewServer(up)
	t.Cleanup(upSrv.Close)
	a := f.s.providers["anthropic"]
	a.URL, _ = ParseURL(upSrv.URL)
	f.s.providers["anthropic"] = a
	ga, err := f.s.Grant(contract.Sandbox{Swarm: "sw1", Container: "aimi-a"}, "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	gb, err := f.s.Grant(contract.Sandbox{Swarm: "sw1", Container: "aimi-b"}, "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	ca, cb := f.client("127.0.0.1"), f.client("127.0.0.2")
	if st, ans := limitsOf(t, ca, ga, ga.Env["ANTHROPIC_API_KEY"]); st != http.StatusOK || len(ans.Limits) != 0 {
		t.Fatalf("before any call: %d %+v, want 200 and no limits", st, ans)
	}
	before := time.Now()
	resp := post(t, ca, ga.Env["ANTHROPIC_BASE_URL"], ga.Env["ANTHROPIC_API_KEY"], `{}`)
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("call: %d, want the provider's 429", resp.StatusCode)
	}
	// Any of the container's placeholders will do (here the other provider's).
	st, ans := limitsOf(t, ca, ga, ga.Env["OPENAI_API_KEY"])
	if st != http.StatusOK || len(ans.Limits) != 1 {
		t.Fatalf("after the 429: %d %+v, want one limit", st, ans)
	}
	l := ans.Limits[0]
	if l.Provider != "anthropic" || l.Hit.Before(before) || l.Until.Sub(l.Hit) < 29*time.Second || l.Until.Sub(l.Hit) > 31*time.Second {
		t.Errorf("limit %+v, want anthropic hit now until 30s later", l)
	}
	st, ans = limitsOf(t, cb, gb, gb.Env["ANTHROPIC_API_KEY"])
	if st != http.StatusOK || len(ans.Limits) != 1 || !ans.Limits[0].Hit.IsZero() || !ans.Limits[0].Until.Equal(l.Until) {
		t.Errorf("the other container of the account: %d %+v, want the limit in force without a hit", st, ans)
	}
	if st, _ := limitsOf(t, cb, ga, ga.Env["ANTHROPIC_API_KEY"]); st != http.StatusUnauthorized {
		t.Errorf("a's placeholder from b's address: %d, want 401", st)
	}
	if st, _ := limitsOf(t, ca, ga, ""); st != http.StatusUnauthorized {
		t.Errorf("no placeholder: %d, want 401", st)
	}
	if held := f.s.LimitHeld(contract.Sandbox{Swarm: "sw1", Container: "aimi-a"}); held < 29*time.Second || held > 31*time.Second {
		t.Errorf("a was held %v, want the 30s to the reset", held)
	}
	if held := f.s.LimitHeld(contract.Sandbox{Swarm: "sw1", Container: "aimi-b"}); held != 0 {
		t.Errorf("b was held %v, want 0: none of its calls met the limit", held)
	}
	if len(up.arrivals) != 1 {
		t.Errorf("the provider saw %d calls, want 1: the query is never forwarded", len(up.arrivals))
	}
	f.s.Revoke(contract.Sandbox{Swarm: "sw1", Container: "aimi-a"})
	ga2, err := f.s.Grant(contract.Sandbox{Swarm: "sw1", Container: "aimi-a"}, "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	if st, ans := limitsOf(t, ca, ga2, ga2.Env["ANTHROPIC_API_KEY"]); st != http.StatusOK || len(ans.Limits) != 1 || !ans.Limits[0].Hit.IsZero() {
		t.Errorf("after a revoke: %d %+v, want only the limit in force", st, ans)
	}
	if held := f.s.LimitHeld(contract.Sandbox{Swarm: "sw1", Container: "aimi-a"}); held != 0 {
		t.Errorf("after a revoke a was held %v, want 0", held)
	}
}

// TestLimitIsKnownBeforeTheLimitedAnswerEnds: the runner may ask the
// moment its agent gave up on a 429, before the gateway's call is over
// (here the answer's body stays open): the limit is already known.
func TestLimitIsKnownBeforeTheLimitedAnswerEnds(t *testing.T) {
	f := newFixture(t, Limits{})
	release := make(chan struct{})
	upSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "20")
		w.WriteHeader(http.StatusTooManyRequests)
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-time.After(time.Minute):
		}
	}))
	t.Cleanup(upSrv.Close)
	defer close(release)
	a := f.s.providers["anthropic"]
	a.URL, _ = ParseURL(upSrv.URL)
	f.s.providers["anthropic"] = a
	g, err := f.s.Grant(contract.Sandbox{Swarm: "sw1", Container: "aimi-a"}, "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	c := f.client("127.0.0.1")
	resp := post(t, c, g.Env["ANTHROPIC_BASE_URL"], g.Env["ANTHROPIC_API_KEY"], `{}`)
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("call: %d, want 429", resp.StatusCode)
	}
	st, ans := limitsOf(t, c, g, g.Env["ANTHROPIC_API_KEY"])
	if st != http.StatusOK || len(ans.Limits) != 1 || ans.Limits[0].Hit.IsZero() || ans.Limits[0].Until.Sub(ans.Limits[0].Hit) < 19*time.Second {
		t.Fatalf("while the limited answer streams: %d %+v, want the hit and its reset 20s later", st, ans)
	}
}
