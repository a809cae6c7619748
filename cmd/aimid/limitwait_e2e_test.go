package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/client"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/cli"
	"github.com/aimi-tools/swarm/internal/dockertest"
	"github.com/aimi-tools/swarm/internal/syncbuf"
	"github.com/aimi-tools/swarm/internal/testwait"
)

// resetProvider answers like the Anthropic Messages API (200), but the
// call after limit(d) gets 429 with retry-after d; it records when each
// call arrived.
type resetProvider struct {
	mu       sync.Mutex
	next     time.Duration // the next call's retry-after (0: answer 200)
	limited  time.Time     // when the last 429 was answered
	reset    time.Time     // and when its retry-after ends
	arrivals []time.Time
}

func (p *resetProvider) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	now := time.Now()
	p.arrivals = append(p.arrivals, now)
	d := p.next
	p.next = 0
	if d > 0 {
		p.limited, p.reset = now, now.Add(d)
	}
	p.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if d > 0 {
		w.Header().Set("Retry-After", fmt.Sprint(int(d.Seconds())))
		w.WriteHeader(http.StatusTooManyRequests)
		fmt.Fprint(w, `{"type":"error","error":{"type":"rate_limit_error","message":"rate limited"}}`)
		return
	}
	fmt.Fprint(w, `{"type":"message","role":"assistant","content":[{"type":"text","text":"hello"}],"usage":{"input_tokens":3,"output_tokens":1}}`)
}

func (p *resetProvider) limit(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.next = d
}

// lastReset is the last 429's reset and when the calls after that 429
// arrived.
func (p *resetProvider) lastReset() (time.Time, []time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var after []time.Time
	for _, a := range p.arrivals {
		if a.After(p.limited) {
			after = append(after, a)
		}
	}
	return p.reset, after
}

// TestLimitWaitShownJournaledAndKeptAcrossKill9: the real daemon and
// engine, a sandbox calling a fake provider through the model gateway.
// The provider limits a call (429, retry-after 8 s): the sandbox's next
// call waits at the gateway until the reset, and meanwhile `aimi swarm
// status` (table and --json --detail) and `aimi swarm events` say
// "waiting for anthropic limit until HH:MM:SS"; the journal holds the
// wait's start and end. Then a limit of 60 s, and aimid is killed with
// SIGKILL during the wait: the daemon started again holds the sandbox's
// next call until the same reset (kept in its data dir), and shows it.
func TestLimitWaitShownJournaledAndKeptAcrossKill9(t *testing.T) {
	parallelLong(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	up := &resetProvider{}
	srv := httptest.NewServer(up)
	t.Cleanup(srv.Close)
	image := dockertest.BuildGoImage(t, ctx, map[string]string{"/probe": "github.com/aimi-tools/swarm/gateway/internal/probeagent"}, nil, nil)
	repo := gitRepo(t, 1, "waiter")
	dir := shortDir(t)
	sock := filepath.Join(dir, "aimid.sock")
	start := func() *proc {
		return launch(t, daemonOpts{
			Sock:     sock,
			DataDir:  filepath.Join(dir, "data"),
			Config:   "agent:\n  env:\n    ANTHROPIC_API_KEY: sk-ant-limit-test\n",
			LogLevel: "debug",
			Image:    image,
			Env:      []string{"AIMI_MODELS_ANTHROPIC_URL=" + srv.URL},
		})
	}
	p := start()
	run, _ := recordingAimi(ctx, repo, sock)
	if code, out, errOut := run("swarm", "start", "--all"); code != 0 {
		t.Fatalf("start: exit %d\n%s\n%s", code, out, errOut)
	}
	v := waitFor(t, sock, repo, 3*time.Minute, "the container running", func(v api.SwarmView) bool {
		c := v.State.ContainerForTask(taskPath("waiter"))
		return c != nil && c.ContainerID != ""
	})
	c := v.State.ContainerForTask(taskPath("waiter"))
	dc := dockertest.Client(t)
	waitRunning(t, ctx, dc, c.ContainerID)
	waitProbe(t, ctx, dc, c.ContainerID) // its own calls are done
	env := containerEnv(t, ctx, dc, c.ContainerID)
	call := func() string {
		return execIn(t, ctx, dc, c.ContainerID, "/probe", "call", env["ANTHROPIC_BASE_URL"], env["ANTHROPIC_API_KEY"])
	}
	evCtx, stopEvents := context.WithCancel(ctx)
	events := &syncbuf.Buffer{}
	evDone := make(chan struct{})
	evErr := &syncbuf.Buffer{}
	go func() {
		defer close(evDone)
		cliRunTo(evCtx, events, evErr, "swarm", "events", "--repo", repo, "--socket", sock)
	}()
	// The wait's start must not fall before the stream is followed.
	testwait.Eventually(t, time.Minute, "aimi swarm events following", func() error {
		if !strings.Contains(evErr.String(), cli.EventsFollowing) {
			return fmt.Errorf("stderr: %q", evErr.String())
		}
		return nil
	})

	held := make(chan string, 1)
	lw := limitWaitRun{up: up, call: call, run: run, sock: sock, repo: repo, name: c.ContainerName}
	lw.shownJournaledAndOver(t, held, events, stopEvents, evDone)

	// A limit of 60 s, and the daemon killed during the wait.
	up.limit(60 * time.Second)
	if got := call(); got != "429" {
		t.Fatalf("the second limited call: %q", got)
	}
	reset, _ := up.lastReset()
	dying := make(chan string, 1)
	go func() { dying <- call() }()
	waitLimitWait(t, sock, repo, c.ContainerName, reset)
	kill9(t, p)
	<-dying // its connection went with the daemon
	p2 := start()
	defer p2.stop(t)
	v = waitFor(t, sock, repo, 2*time.Minute, "the swarm adopted", func(v api.SwarmView) bool { return detailOf(v, c.ContainerName).Name != "" })
	if n := detailOf(v, c.ContainerName).Rejected; n != 0 {
		t.Errorf("after the restart the journal's limit-wait notes count as %d rejected lines", n)
	}
	if time.Until(reset) < 5*time.Second {
		t.Skipf("the restart took until %s before the reset: too late to see the wait held", time.Until(reset))
	}
	go func() { held <- call() }()
	waitLimitWait(t, sock, repo, c.ContainerName, reset)
	if got := waitHeld(t, held); got != "200" {
		t.Fatalf("the call after the restart: %q, want 200 after the reset", got)
	}
	if _, after := up.lastReset(); len(after) != 1 || after[0].Before(reset) {
		t.Fatalf("after the restart, calls reached the provider at %v, the kept reset was %v", after, reset)
	}
	execIn(t, ctx, dc, c.ContainerID, "/probe", "release")
	waitFor(t, sock, repo, 3*time.Minute, "the container exited", allExited)
	if !strings.Contains(p2.logs(), "kept across the restart") {
		t.Errorf("the restarted daemon did not say it holds the kept reset")
	}
}

// waitRunning waits for container id to run: created is not started yet,
// and exec needs it running.
func waitRunning(t *testing.T, ctx context.Context, dc *client.Client, id string) {
	t.Helper()
	for { // created is not started yet: exec needs it running
		info, err := dc.ContainerInspect(ctx, id)
		if err == nil && info.State != nil && info.State.Running {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the container never ran: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// limitWaitRun is the sandbox name of a swarm in repo under the daemon on
// sock, calling the provider up through the gateway with call.
type limitWaitRun struct {
	up               *resetProvider
	call             func() string
	run              func(args ...string) (int, string, string)
	sock, repo, name string
}

// shownJournaledAndOver limits the provider for 8 s: the next call is held
// at the gateway, the wait shows in status, ends at the reset, and its
// start and end reach the event stream (then stopped) and the journal.
func (r limitWaitRun) shownJournaledAndOver(t *testing.T, held chan string, events *syncbuf.Buffer, stopEvents context.CancelFunc, evDone <-chan struct{}) {
	t.Helper()
	// A limit of 8 s: the next call waits at the gateway, visibly.
	r.up.limit(8 * time.Second)
	if got := r.call(); got != "429" {
		t.Fatalf("the limited call: %q, want the provider's 429", got)
	}
	go func() { held <- r.call() }()
	reset, _ := r.up.lastReset()
	d := waitLimitWait(t, r.sock, r.repo, r.name, reset)
	if code, out, _ := r.run("swarm", "status"); code != 0 || !strings.Contains(out, d.Text) {
		t.Errorf("status table during the wait: exit %d\n%s", code, out)
	}
	if got := waitHeld(t, held); got != "200" {
		t.Fatalf("the held call: %q, want 200 after the reset", got)
	}
	if _, after := r.up.lastReset(); len(after) != 1 || after[0].Before(reset) {
		t.Fatalf("calls after the 429 reached the provider at %v, the reset was %v", after, reset)
	}
	waitFor(t, r.sock, r.repo, time.Minute, "the wait over", func(v api.SwarmView) bool { return len(detailOf(v, r.name).LimitWaits) == 0 })
	deadline := time.Now().Add(time.Minute)
	for !strings.Contains(events.String(), "limit-wait-over "+r.name) && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	stopEvents()
	<-evDone
	if ev := events.String(); !strings.Contains(ev, "limit-wait "+r.name+": "+d.Text) || !strings.Contains(ev, "limit-wait-over "+r.name+": the wait for anthropic is over after") {
		t.Errorf("events of the wait:\n%s", ev)
	}
	_, logs, _ := r.run("swarm", "logs", r.name)
	if !strings.Contains(logs, "daemon:limit-wait") || !strings.Contains(logs, d.Text) || !strings.Contains(logs, "the wait for anthropic is over after") {
		t.Errorf("the journal lacks the wait's start or end:\n%s", logs)
	}
}

// waitLimitWait waits until status --json --detail shows the container
// waiting for anthropic's limit until reset (within a second: the
// gateway reads the reset from the header as the answer arrives).
func waitLimitWait(t *testing.T, sock, repo, name string, reset time.Time) api.LimitWait {
	t.Helper()
	var wait api.LimitWait
	testwait.Eventually(t, time.Minute, fmt.Sprintf("status --json --detail to show the wait for the limit until %s", reset), func() error {
		code, out, errOut := aimi(context.Background(), "swarm", "status", "--json", "--detail", "--repo", repo, "--socket", sock)
		var v api.SwarmView
		if code == 0 && json.Unmarshal([]byte(out), &v) == nil {
			for _, w := range detailOf(v, name).LimitWaits {
				if w.Provider == "anthropic" && w.Reason == "limit" && w.Until != nil && w.Until.Sub(reset).Abs() < time.Second &&
					w.Text == "waiting for anthropic limit until "+w.Until.Local().Format(time.TimeOnly) {
					wait = w
					return nil
				}
			}
		}
		return fmt.Errorf("exit %d\n%s\n%s", code, out, errOut)
	}, testwait.Every(200*time.Millisecond))
	return wait
}

func waitHeld(t *testing.T, held <-chan string) string {
	t.Helper()
	select {
	case got := <-held:
		return got
	case <-time.After(2 * time.Minute):
		t.Fatal("the held call did not end")
	}
	return ""
}

func detailOf(v api.SwarmView, name string) api.ContainerDetail {
	for _, d := range v.Containers {
		if d.Name == name {
			return d
		}
	}
	return api.ContainerDetail{}
}

// cliRunTo runs an aimi command until ctx ends, its output into out.
func cliRunTo(ctx context.Context, out, errOut *syncbuf.Buffer, args ...string) {
	cli.Run(ctx, args, cli.Streams{In: strings.NewReader(""), Out: out, Err: errOut})
}

// containerEnv is the environment container id was created with.
func containerEnv(t *testing.T, ctx context.Context, c *client.Client, id string) map[string]string {
	t.Helper()
	info, err := c.ContainerInspect(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	for _, kv := range info.Config.Env {
		k, val, _ := strings.Cut(kv, "=")
		m[k] = val
	}
	return m
}
