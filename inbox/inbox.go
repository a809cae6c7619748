package inbox

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/egress"
	"github.com/aimi-tools/swarm/internal/redact"
)

// Defaults and bounds.
const (
	DefaultTimeout         = 30 * time.Minute
	DefaultMaxPerContainer = 8
	DefaultMaxTotal        = 1024
	// answeredKeep is how long an answer waits for its runner to fetch it.
	answeredKeep = time.Hour
	maxAnswered  = 4096
)

// Fallbacks of Config.Fallback.
const (
	FallbackReject = "reject"
	FallbackAllow  = "allow"
)

// Config configures an Inbox.
type Config struct {
	Timeout         time.Duration // agent.ask_timeout (default DefaultTimeout)
	Fallback        string        // agent.ask_fallback: FallbackReject (default) or FallbackAllow
	MaxPerContainer int           // pending requests one container may have (default DefaultMaxPerContainer)
	MaxTotal        int           // pending requests in all (default DefaultMaxTotal)
	// Journal writes one line to a container's journal (the daemon's
	// stream); nil journals nothing.
	Journal func(ctx context.Context, sb contract.Sandbox, text string)
	// Publish sends an event to the daemon's subscribers; nil drops it.
	Publish func(api.Event)
	// Running reports whether the container can still use an answer; a
	// request of one that cannot is refused. nil: every container can.
	Running func(sb contract.Sandbox) bool
	// Redact replaces the secrets the daemon knows in the agent's text
	// before anyone sees it (nil: none known).
	Redact *redact.Redactor
	Logger *slog.Logger
	Now    func() time.Time
	// Grant puts a grant of a fetch request's answer in force (egress.ask)
	// before the answer releases the connections held for it; it is called
	// with the inbox's lock held and must not call the inbox. nil: answers
	// release the held connections only.
	Grant func(ctx context.Context, g egress.Grant)
	// Stories lists the stories a container runs now (a grant of scope
	// once lasts as long as they); nil: none known.
	Stories func(sb contract.Sandbox) []string
	// RepoOf names a swarm's repository (for fetch requests, which come
	// from the egress proxy); nil: "".
	RepoOf func(swarmID string) string
}

// Inbox is the set of pending requests. It is safe for concurrent use.
type Inbox struct {
	cfg Config
	log *slog.Logger

	mu       sync.Mutex
	pending  map[string]*entry // by id
	answered map[string]answer // by id: kept until the runner fetched it
	refused  map[contract.Sandbox]*refusals
	lines    map[contract.Sandbox]*lineBudget
	rejected map[fetchKey]bool // hosts a person refused a swarm
	changed  chan struct{}     // closed and replaced at every change (Watch)
}

type entry struct {
	req   api.PermissionRequest
	done  chan struct{} // closed when answered
	ans   answer
	fetch *fetchAsk // a request of the egress proxy (kind fetch); nil for an agent's
}

type answer struct {
	optionID string
	gone     bool // the container ended: no answer
	at       time.Time
}

// refusals counts the requests of one container refused since its last
// journal line about them (one line per refusalEvery, not one per request).
type refusals struct {
	n    int
	last time.Time
}

const refusalEvery = 10 * time.Second

// New returns an empty Inbox.
func New(cfg Config) *Inbox {
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Fallback == "" {
		cfg.Fallback = FallbackReject
	}
	if cfg.MaxPerContainer <= 0 {
		cfg.MaxPerContainer = DefaultMaxPerContainer
	}
	if cfg.MaxTotal <= 0 {
		cfg.MaxTotal = DefaultMaxTotal
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Inbox{cfg: cfg, log: cfg.Logger, pending: map[string]*entry{}, answered: map[string]answer{},
		refused: map[contract.Sandbox]*refusals{}, lines: map[contract.Sandbox]*lineBudget{}, rejected: map[fetchKey]bool{}, changed: make(chan struct{})}
}

// RequestID is the id people see for request runnerID of container sb:
// stable across daemon restarts and resends, distinct between containers.
func RequestID(sb contract.Sandbox, runnerID string) string {
	h := sha256.Sum256([]byte(sb.Swarm + "\x00" + sb.Container + "\x00" + runnerID))
	return hex.EncodeToString(h[:5])
}

// List returns the pending requests (of repo, or all when repo is ""),
// oldest first.
func (in *Inbox) List(repo string) []api.PermissionRequest {
	in.mu.Lock()
	defer in.mu.Unlock()
	out := make([]api.PermissionRequest, 0, len(in.pending))
	for _, e := range in.pending {
		if repo == "" || e.req.RepoPath == repo {
			out = append(out, e.req)
		}
	}
	slices.SortFunc(out, func(a, b api.PermissionRequest) int {
		if c := a.AskedAt.Compare(b.AskedAt); c != 0 {
			return c
		}
		return compareStr(a.ID, b.ID)
	})
	return out
}

func compareStr(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Changed returns a channel closed at the next change of the pending set.
func (in *Inbox) Changed() <-chan struct{} {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.changed
}

func (in *Inbox) notifyLocked() {
	close(in.changed)
	in.changed = make(chan struct{})
}

// Answer answers one request (req.ID) or every pending request of one
// container (req.AllFrom) with req.Option.
func (in *Inbox) Answer(ctx context.Context, req api.AnswerRequest) (api.AnswerReport, error) {
	if (req.ID == "") == (req.AllFrom == "") {
		return api.AnswerReport{}, fmt.Errorf("%w: give a request id or --all-from a container, not both", api.ErrInvalidRequest)
	}
	in.mu.Lock()
	var targets []*entry
	for _, e := range in.pending {
		if req.RepoPath != "" && e.req.RepoPath != req.RepoPath {
			continue
		}
		if e.req.ID == req.ID || (req.AllFrom != "" && e.req.ContainerName == req.AllFrom) {
			targets = append(targets, e)
		}
	}
	if len(targets) == 0 {
		in.mu.Unlock()
		what := "request " + req.ID
		if req.AllFrom != "" {
			what = "request of container " + req.AllFrom
		}
		return api.AnswerReport{}, fmt.Errorf("%w: no pending %s (answered already, timed out, or its container ended); 'aimi swarm inbox' lists what waits", api.ErrUnknownContainer, what)
	}
	chosen := make([]string, len(targets))
	for i, e := range targets {
		id, err := resolve(e.req.Options, req.Option)
		if err != nil {
			in.mu.Unlock()
			return api.AnswerReport{}, fmt.Errorf("%w: request %s: %w", api.ErrInvalidRequest, e.req.ID, err)
		}
		chosen[i] = id
	}
	rep := api.AnswerReport{Answered: []api.Answered{}}
	journal := make([]func(), len(targets))
	for i, e := range targets {
		journal[i] = func() {}
		if e.fetch != nil {
			journal[i] = in.grantLocked(ctx, e, chosen[i], "person")
		}
		in.answerLocked(e, answer{optionID: chosen[i], at: in.cfg.Now()})
		rep.Answered = append(rep.Answered, api.Answered{ID: e.req.ID, ContainerName: e.req.ContainerName, OptionID: chosen[i]})
	}
	in.mu.Unlock()
	for i, e := range targets {
		journal[i]()
		in.note(ctx, e.req, fmt.Sprintf("permission request %s (%s): a person chose %q", e.req.ID, e.req.Title, chosen[i]), func() {})
		in.publish(e.req, api.EventPermissionAnswered, chosen[i], "person")
	}
	return rep, nil
}

// resolve maps an answer (an option id, "allow" or "reject") to an option.
func resolve(opts []api.PermissionOption, want string) (string, error) {
	for _, o := range opts {
		if o.ID == want {
			return o.ID, nil
		}
	}
	if id, ok := byKind(opts, want); ok {
		return id, nil
	}
	ids := make([]string, len(opts))
	for i, o := range opts {
		ids[i] = o.ID
	}
	return "", fmt.Errorf("option %q is not one the agent offered (%v) nor allow/reject of a matching kind", want, ids)
}

// byKind finds the first option of a kind ("allow" or "reject"), a
// one-time one before an "always" one.
func byKind(opts []api.PermissionOption, want string) (string, bool) {
	var kinds []string
	switch want {
	case FallbackAllow:
		kinds = []string{"allow_once", "allow_always"}
	case FallbackReject:
		kinds = []string{"reject_once", "reject_always"}
	}
	for _, k := range kinds {
		for _, o := range opts {
			if o.Kind == k {
				return o.ID, true
			}
		}
	}
	return "", false
}

// answerLocked moves e from pending to answered and wakes its runner.
func (in *Inbox) answerLocked(e *entry, a answer) {
	delete(in.pending, e.req.ID)
	e.ans = a
	close(e.done)
	in.answered[e.req.ID] = a
	if len(in.answered) > maxAnswered {
		in.pruneAnsweredLocked(true)
	}
	in.notifyLocked()
}

// pruneAnsweredLocked forgets answers older than answeredKeep (or, when
// full, the oldest half).
func (in *Inbox) pruneAnsweredLocked(full bool) {
	cut := in.cfg.Now().Add(-answeredKeep)
	if full {
		times := make([]time.Time, 0, len(in.answered))
		for _, a := range in.answered {
			times = append(times, a.at)
		}
		slices.SortFunc(times, func(a, b time.Time) int { return a.Compare(b) })
		cut = times[len(times)/2]
	}
	for id, a := range in.answered {
		if !a.at.After(cut) {
			delete(in.answered, id)
		}
	}
}

// journal writes text to r's container's journal, redacted once more:
// besides the request's own fields (redacted at intake), a refusal quotes
// what the agent sent.
func (in *Inbox) journal(ctx context.Context, r api.PermissionRequest, text string) {
	if in.cfg.Journal != nil {
		in.cfg.Journal(context.WithoutCancel(ctx), contract.Sandbox{Swarm: r.SwarmID, Container: r.ContainerName}, in.cfg.Redact.String(text))
	}
}

func (in *Inbox) publish(r api.PermissionRequest, kind api.EventKind, option, by string) {
	if in.cfg.Publish == nil {
		return
	}
	e := api.Event{Time: in.cfg.Now().UTC(), SwarmID: r.SwarmID, RepoPath: r.RepoPath, ContainerName: r.ContainerName,
		Kind: kind, StoryID: r.StoryID, RequestID: r.ID, Output: r.Title}
	if kind == api.EventPermissionAnswered {
		e.Option, e.AnsweredBy = option, by
	} else {
		req := r
		e.Request = &req
	}
	in.cfg.Publish(e)
}
