package notify

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/internal/redact"
	"github.com/aimi-tools/swarm/internal/termsafe"
)

// Notice kinds.
const (
	KindRequestWaiting    = "permission-request-waiting"
	KindContainerFailed   = "container-failed"
	KindContainerFinished = "container-finished"
	KindSwarmFinished     = "swarm-finished"
	KindLimitWait         = "limit-wait-started"
	KindConflict          = "conflict-detected"
)

// NtfyPrefix marks a webhook URL that gets plain text (an ntfy topic).
const NtfyPrefix = "ntfy:"

// Defaults.
const (
	DefaultQueue    = 64
	DefaultAttempts = 4
	DefaultTimeout  = 10 * time.Second
	maxText         = 300 // bytes of one agent-supplied field
)

// Notice is what a target receives (as JSON, or Text alone).
type Notice struct {
	Kind      string    `json:"kind"`
	Text      string    `json:"text"` // one line for people (Slack's field)
	Time      time.Time `json:"time"`
	Repo      string    `json:"repo"`
	SwarmID   string    `json:"swarmId"`
	Container string    `json:"container,omitempty"`
	StoryID   string    `json:"storyId,omitempty"`
	Status    string    `json:"status,omitempty"`
	Code      string    `json:"code,omitempty"`
	RequestID string    `json:"requestId,omitempty"`
	// Provider, Until and Containers are a limit wait's: the model
	// provider, when its limit resets, the containers whose calls wait.
	Provider   string    `json:"provider,omitempty"`
	Until      time.Time `json:"until,omitzero"`
	Containers []string  `json:"containers,omitempty"`
	// More counts the waiting requests a coalesced notice tells of (the
	// bound of notices of waiting requests held them back).
	More  int    `json:"more,omitempty"`
	Board string `json:"board,omitempty"`
}

// Config configures a Notifier.
type Config struct {
	Webhooks []string // URLs; NtfyPrefix+URL for plain text
	Command  []string // argv; the notice's text is added as the last argument
	// Board returns the board's URL when one runs ("" otherwise); nil: none.
	Board    func() string
	Queue    int           // notices waiting per target (default DefaultQueue)
	Attempts int           // deliveries tried per notice (default DefaultAttempts)
	Timeout  time.Duration // one attempt (default DefaultTimeout)
	Backoff  time.Duration // first wait between attempts (default 1s), doubling
	// Journal records a failed delivery in the container's journal (when
	// the notice names one); nil: the daemon's log only.
	Journal func(ctx context.Context, sb contract.Sandbox, text string)
	// Redact replaces the secrets the daemon knows in every notice's text
	// (nil: none known). The inbox redacts at intake already; this is the
	// second line, for whatever else reaches a notice.
	Redact *redact.Redactor
	// RequestWindow, RequestsPerContainer and RequestsPerSwarm bound the
	// notices of waiting requests (defaults DefaultRequestWindow...).
	RequestWindow        time.Duration
	RequestsPerContainer int
	RequestsPerSwarm     int
	Logger               *slog.Logger
	Client               *http.Client // default: one that refuses redirects
}

// Notifier sends notices to its targets.
type Notifier struct {
	cfg     Config
	log     *slog.Logger
	targets []*target
	wg      sync.WaitGroup
}

type target struct {
	name  string // for logs and journals: never the URL (a Slack URL is a secret)
	queue chan Notice
	send  func(ctx context.Context, n Notice) error
}

// New checks the configuration and builds the targets (no goroutine runs
// before Run).
func New(cfg Config) (*Notifier, error) {
	if cfg.Queue <= 0 {
		cfg.Queue = DefaultQueue
	}
	if cfg.Attempts <= 0 {
		cfg.Attempts = DefaultAttempts
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Backoff <= 0 {
		cfg.Backoff = time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.RequestWindow <= 0 {
		cfg.RequestWindow = DefaultRequestWindow
	}
	if cfg.RequestsPerContainer <= 0 {
		cfg.RequestsPerContainer = DefaultRequestsPerContainer
	}
	if cfg.RequestsPerSwarm <= 0 {
		cfg.RequestsPerSwarm = DefaultRequestsPerSwarm
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error {
			return errors.New("redirect refused: give the webhook's final URL")
		}}
	}
	n := &Notifier{cfg: cfg, log: cfg.Logger}
	for i, raw := range cfg.Webhooks {
		plain := strings.HasPrefix(raw, NtfyPrefix)
		u, err := url.Parse(strings.TrimPrefix(raw, NtfyPrefix))
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			return nil, fmt.Errorf("notify.webhooks[%d]: not an http(s) URL (an ntfy topic is ntfy:https://ntfy.sh/TOPIC)", i)
		}
		name := fmt.Sprintf("webhook %d (%s)", i+1, u.Host)
		endpoint := u.String()
		n.targets = append(n.targets, &target{name: name, queue: make(chan Notice, cfg.Queue),
			send: func(ctx context.Context, no Notice) error { return n.post(ctx, endpoint, plain, no) }})
	}
	if len(cfg.Command) > 0 {
		if cfg.Command[0] == "" {
			return nil, errors.New("notify.command: the first word (the program) is empty")
		}
		argv, env := cfg.Command, commandEnv(os.Environ(), cfg.Redact)
		n.targets = append(n.targets, &target{name: "command " + argv[0], queue: make(chan Notice, cfg.Queue),
			send: func(ctx context.Context, no Notice) error { return run(ctx, argv, env, no) }})
	}
	return n, nil
}

// Enabled reports whether any target is configured.
func (n *Notifier) Enabled() bool { return len(n.targets) > 0 }

// Run turns events into notices and delivers them until ctx ends (the
// workers stop then; notices still queued are dropped). Notices of
// waiting requests past their bound are held and told together when the
// window ends.
func (n *Notifier) Run(ctx context.Context, events <-chan api.Event) {
	for _, t := range n.targets {
		n.wg.Go(func() { n.work(ctx, t) })
	}
	defer n.wg.Wait()
	g := newGate(n.cfg.RequestsPerContainer, n.cfg.RequestsPerSwarm)
	window := time.NewTicker(n.cfg.RequestWindow)
	defer window.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-window.C:
			for _, no := range g.flush() {
				n.Send(no)
			}
		case e, ok := <-events:
			if !ok {
				events = nil
				continue
			}
			if no, ok := n.notice(e); ok && g.admit(no) {
				n.Send(no)
			}
		}
	}
}

// Send queues a notice, redacted, for every target; a full queue drops it
// for that target (logged), so a slow target never holds the daemon.
func (n *Notifier) Send(no Notice) {
	no = n.redacted(no)
	for _, t := range n.targets {
		select {
		case t.queue <- no:
		default:
			n.log.Warn("notice dropped: its target's queue is full", "target", t.name, "kind", no.Kind, "container", no.Container)
		}
	}
}

// redacted is no with the known secrets replaced in every text field.
func (n *Notifier) redacted(no Notice) Notice {
	r := n.cfg.Redact
	for _, f := range []*string{&no.Text, &no.Repo, &no.SwarmID, &no.Container, &no.StoryID, &no.Status, &no.Code, &no.RequestID, &no.Provider} {
		*f = r.String(*f)
	}
	no.Containers = slices.Clone(no.Containers)
	for i := range no.Containers {
		no.Containers[i] = r.String(no.Containers[i])
	}
	return no
}

func (n *Notifier) work(ctx context.Context, t *target) {
	for {
		select {
		case <-ctx.Done():
			return
		case no := <-t.queue:
			n.deliver(ctx, t, no)
		}
	}
}

// deliver tries a notice up to Attempts times with doubling waits.
func (n *Notifier) deliver(ctx context.Context, t *target, no Notice) {
	wait := n.cfg.Backoff
	var err error
	for attempt := 1; attempt <= n.cfg.Attempts; attempt++ {
		actx, cancel := context.WithTimeout(ctx, n.cfg.Timeout)
		err = t.send(actx, no)
		cancel()
		if err == nil || ctx.Err() != nil {
			return
		}
		if attempt < n.cfg.Attempts {
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
			wait *= 2
		}
	}
	msg := fmt.Sprintf("notice %s not delivered to %s after %d attempts: %v", no.Kind, t.name, n.cfg.Attempts, err)
	n.log.Warn("notice not delivered", "target", t.name, "kind", no.Kind, "container", no.Container, "attempts", n.cfg.Attempts, "err", err)
	if n.cfg.Journal != nil && no.Container != "" {
		n.cfg.Journal(ctx, contract.Sandbox{Swarm: no.SwarmID, Container: no.Container}, msg)
	}
}

func (n *Notifier) post(ctx context.Context, endpoint string, plain bool, no Notice) error {
	body, ctype := []byte(no.Text), "text/plain; charset=utf-8"
	if !plain {
		b, err := json.Marshal(no)
		if err != nil {
			return err
		}
		body, ctype = b, "application/json"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, bytes.NewReader(body))
	if err != nil {
		return errors.New("build the request") // the error would name the URL
	}
	req.Header.Set("Content-Type", ctype)
	if plain {
		req.Header.Set("Title", "aimi swarm: "+no.Kind)
	}
	resp, err := n.cfg.Client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // without the URL, which may hold a token
		}
		return err
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	return nil
}

// commandEnv is the daemon's environment without the variables that hold
// a known secret (a model key agent.env takes from ${VAR}, the publish
// token): notify.command needs none of them.
func commandEnv(environ []string, r *redact.Redactor) []string {
	env := make([]string, 0, len(environ))
	for _, kv := range environ {
		_, v, _ := strings.Cut(kv, "=")
		if r.String(v) == v {
			env = append(env, kv)
		}
	}
	return env
}

// run starts argv with the text as its last argument (no shell sees it)
// and env as its environment.
func run(ctx context.Context, argv, env []string, no Notice) error {
	cmd := exec.CommandContext(ctx, argv[0], append(append([]string{}, argv[1:]...), no.Text)...)
	cmd.Env = env
	cmd.WaitDelay = time.Second
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%w: %s", err, termsafe.Line(string(out), 200))
	}
	return nil
}
