package runner

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/aimi-tools/swarm/acpmsg"
	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/tasks"
	acp "github.com/coder/acp-go-sdk"
)

// DefaultLimitRetries is how many times a story a provider's limit failed
// is retried (agent.limit_retries).
const DefaultLimitRetries = 5

// limitQueryTimeout bounds one question to the model gateway.
const limitQueryTimeout = 15 * time.Second

// maxLimitWait bounds a wait for a reset whatever the gateway says: the
// gateway cuts resets to agent.limit_max_wait, at most a week.
const maxLimitWait = 7 * 24 * time.Hour

// limitResetMargin is added to a limit's reset before the retry starts:
// the gateway lets held calls through at the reset, ahead of the retry's.
const limitResetMargin = time.Second

// gatewayClient asks the model gateway which limits the container's
// model calls met (contract.GatewayLimitsPath), authenticated by one of
// the container's placeholders.
type gatewayClient struct {
	url  string
	key  string
	http *http.Client
}

// newGatewayClient finds the gateway, a placeholder and the trust store
// in env (the container's, as the daemon set it); nil when the container
// has no model gateway.
func newGatewayClient(env []string, dial dialFunc) (*gatewayClient, error) {
	get := func(name string) string {
		v := ""
		for _, kv := range env {
			if val, ok := strings.CutPrefix(kv, name+"="); ok {
				v = val
			}
		}
		return v
	}
	g := &gatewayClient{url: strings.TrimSuffix(get(contract.EnvGatewayURL), "/")}
	for _, kv := range env {
		_, v, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(v, contract.GatewayPlaceholderPrefix) && len(v) == len(contract.GatewayPlaceholderPrefix)+64 {
			g.key = v
			break
		}
	}
	if g.url == "" || g.key == "" {
		return nil, nil
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.Proxy = nil // the gateway is reached directly, never through the egress proxy
	tr.DialContext = dialWithin(dial, 30*time.Second)
	for _, name := range []string{contract.EnvSSLCertFile, contract.EnvNodeExtraCACerts} {
		f := get(name)
		if f == "" {
			continue
		}
		pem, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("read the model gateway's trust store %s (%s): %w", f, name, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("the model gateway's trust store %s (%s) holds no PEM certificate", f, name)
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
		break
	}
	g.http = &http.Client{Transport: tr, Timeout: limitQueryTimeout}
	return g, nil
}

// limits asks the gateway.
func (g *gatewayClient) limits(ctx context.Context) (contract.GatewayLimits, error) {
	var ans contract.GatewayLimits
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, g.url+contract.GatewayLimitsPath, nil)
	if err != nil {
		return ans, fmt.Errorf("ask the model gateway for limits: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+g.key)
	resp, err := g.http.Do(req)
	if err != nil {
		return ans, fmt.Errorf("ask the model gateway for limits: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return ans, fmt.Errorf("ask the model gateway for limits: status %d (is the daemon older than this runner?)", resp.StatusCode)
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&ans); err != nil {
		return ans, fmt.Errorf("ask the model gateway for limits: its answer does not parse: %w", err)
	}
	return ans, nil
}

// metLimit is a provider's limit that held the container's calls during
// a turn: until is on the runner's clock.
type metLimit struct {
	provider string
	until    time.Time
}

// limitMet asks the gateway whether the container's calls met a limit
// since since (on the runner's clock) or one is in force now, and returns
// the one that resets last.
func (r *run) limitMet(ctx context.Context, since time.Time) (metLimit, bool) {
	if r.gateway == nil {
		return metLimit{}, false
	}
	qctx, cancel := context.WithTimeout(ctx, limitQueryTimeout)
	defer cancel()
	asked := time.Now()
	ans, err := r.gateway.limits(qctx)
	if err != nil {
		r.log.Warn("could not learn whether the story's model calls were limited: it fails as any other", "err", err)
		return metLimit{}, false
	}
	// The gateway's clock may not be ours (a cluster node): its times are
	// taken relative to its own now.
	skew := ans.Now.Sub(asked)
	var best metLimit
	found := false
	for _, l := range ans.Limits {
		hit := !l.Hit.IsZero() && !l.Hit.Add(-skew).Before(since)
		if !hit && !l.Until.After(ans.Now) {
			continue
		}
		wait := min(max(l.Until.Sub(ans.Now), 0), maxLimitWait)
		if until := time.Now().Add(wait); !found || until.After(best.until) {
			best, found = metLimit{provider: oneLine(l.Provider, 64), until: until}, true
		}
	}
	return best, found
}

// endedInError says whether a turn ended without finishing the story and
// without the run stopping or the watchdog cancelling it.
func endedInError(ctx context.Context, o outcome) bool {
	return ctx.Err() == nil && o.stalled == "" && (o.err != nil || o.stop != acp.StopReasonEndTurn)
}

// runLimited runs a story's turn (runWatched); a turn that ended in error
// while the container's model calls were limited is no failure: the
// story waits for the limit's reset (journaled) and goes on, in the same
// session where the agent can load it, up to agent.limit_retries times.
func (r *run) runLimited(ctx context.Context, be backend, s tasks.Story, prompt, dir string) outcome {
	start := time.Now()
	o := r.runWatched(ctx, be, s, prompt, dir)
	for retry := 1; endedInError(ctx, o); retry++ {
		lim, ok := r.limitMet(ctx, start)
		if !ok {
			return o
		}
		if retry > r.cfg.LimitRetries {
			r.log.Warn("story limited again: no retries left", "story", s.ID, "provider", lim.provider, "retries", r.cfg.LimitRetries)
			o.limited = fmt.Sprintf("the %s limit held its model calls through %d retries (agent.limit_retries %d)", lim.provider, r.cfg.LimitRetries, r.cfg.LimitRetries)
			if r.cfg.LimitRetries == 0 {
				o.limited = fmt.Sprintf("the %s limit held its model calls; agent.limit_retries 0 retries no story", lim.provider)
			}
			return o
		}
		if !r.waitLimit(ctx, s, lim, retry, o) {
			return outcome{stop: acp.StopReasonCancelled, summary: o.summary, cost: o.cost}
		}
		start = time.Now()
		o2 := r.resumeTurn(ctx, be, s, prompt, dir, o, lim, retry)
		o2.cost = addCost(o.cost, o2.cost)
		o = o2
	}
	return o
}

// waitLimit journals the wait for lim's reset and waits for it; false
// when the run stopped meanwhile.
func (r *run) waitLimit(ctx context.Context, s tasks.Story, lim metLimit, retry int, o outcome) bool {
	why := "it ended with " + stopReasonText(o.stop)
	if o.err != nil {
		why = oneLine(o.err.Error(), 300)
	}
	r.log.Warn("story limited: waiting for the reset", "story", s.ID, "provider", lim.provider, "until", lim.until, "retry", retry)
	r.emit(acpmsg.TypeProgressUpdate, &acpmsg.ProgressUpdate{StoryID: s.ID, Status: acpmsg.StoryInProgress,
		Output: acpmsg.TruncateOutput(fmt.Sprintf("%s: waiting for %s limit until %s: the agent's turn ended in error while its model calls were limited (%s); retry %d of %d after the reset (agent.limit_retries).",
			s.ID, lim.provider, lim.until.UTC().Format(time.TimeOnly), why, retry, r.cfg.LimitRetries))})
	t := time.NewTimer(time.Until(lim.until) + limitResetMargin)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// limitedRetryNote tells a new session what the attempt a limit ended did.
const limitedRetryNote = "\n\nNote: an earlier attempt at this story ended in error because the %s model provider's limit was reached; the limit has reset. What it did: %s Its changes, if any, are in the working tree: check them and finish the story."

// limitedResumeNote goes on in the loaded session of the attempt.
const limitedResumeNote = "Your previous turn ended in error because the %s model provider's limit was reached; the limit has reset. Go on with the story where you left off and finish it."

// resumeTurn runs the story again after lim's reset: in the earlier
// session when the agent can load it, else in a new one told what the
// failed attempt did.
func (r *run) resumeTurn(ctx context.Context, be backend, s tasks.Story, prompt, dir string, o outcome, lim metLimit, retry int) outcome {
	how := "in a new session told what the failed attempt did"
	rs, canResume := be.(resumer)
	if canResume && o.loadable && o.session != "" {
		how = "in the same session (session/load)"
	}
	r.emit(acpmsg.TypeProgressUpdate, &acpmsg.ProgressUpdate{StoryID: s.ID, Status: acpmsg.StoryInProgress,
		Output: acpmsg.TruncateOutput(fmt.Sprintf("%s: the %s limit reset at %s; resuming the story %s (retry %d of %d).",
			s.ID, lim.provider, time.Now().UTC().Format(time.TimeOnly), how, retry, r.cfg.LimitRetries))})
	summary := strings.TrimSpace(oneLine(o.summary, 600))
	if summary == "" {
		summary = "it reported nothing."
	}
	fresh := prompt + fmt.Sprintf(limitedRetryNote, lim.provider, summary)
	if !canResume || !o.loadable || o.session == "" {
		return r.runWatched(ctx, be, s, fresh, dir)
	}
	return rs.resumeStory(ctx, s.ID, o.session, func(loaded bool) string {
		if loaded {
			return fmt.Sprintf(limitedResumeNote, lim.provider)
		}
		return fresh
	}, dir)
}

// resumer is a backend that can go on in an earlier ACP session.
type resumer interface {
	resumeStory(ctx context.Context, storyID string, sid acp.SessionId, prompt func(loaded bool) string, dir string) outcome
}

// limitRetriesFromEnv reads agent.limit_retries as the daemon passes it.
func (c *Config) limitRetriesFromEnv(getenv func(string) string) error {
	s := strings.TrimSpace(getenv(contract.EnvLimitRetries))
	if s == "" {
		return nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return fmt.Errorf("%s=%q: want a whole number (0: a limit fails the story)", contract.EnvLimitRetries, s)
	}
	c.LimitRetries = n
	return nil
}
