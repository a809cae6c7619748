package main

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unicode"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/daemon"
	"github.com/aimi-tools/swarm/internal/testwait"
	"github.com/aimi-tools/swarm/state"
)

// inboxRepo makes a checkout without an origin (local git mode) holding
// one task file of one story whose notes carry notes (demo agent markers).
func inboxRepo(t *testing.T, name, notes string) (repo, taskName string) {
	t.Helper()
	repo = shortDir(t)
	gitOut(t, repo, "init", "-q", "-b", "main")
	os.MkdirAll(filepath.Join(repo, ".aimi", "tasks"), 0o755)
	taskName = name + "-" + fmt.Sprintf("%x", sha256.Sum256([]byte(repo)))[:6]
	var f map[string]any
	if err := json.Unmarshal(taskFileJSON("feat/"+taskName, 1), &f); err != nil {
		t.Fatal(err)
	}
	f["userStories"].([]any)[0].(map[string]any)["notes"] = notes
	b, _ := json.Marshal(f)
	if err := os.WriteFile(filepath.Join(repo, ".aimi", "tasks", taskName+"-tasks.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	commitAll(t, repo)
	removeProjectContainersAtEnd(t, repo)
	return repo, taskName
}

// waitInbox polls `aimi swarm inbox --json` until cond holds.
func waitInbox(t *testing.T, run func(args ...string) (int, string, string), d time.Duration, what string, cond func([]api.PermissionRequest) bool) []api.PermissionRequest {
	t.Helper()
	var in api.Inbox
	testwait.Eventually(t, d, what, func() error {
		code, out, errOut := run("swarm", "inbox", "--json")
		if code == 0 && json.Unmarshal([]byte(out), &in) == nil && cond(in.Requests) {
			return nil
		}
		return fmt.Errorf("inbox: %s", out+errOut)
	}, testwait.Every(300*time.Millisecond))
	return in.Requests
}

// TestInboxAnswersFromTheCLIAcrossAKill9: policy ask, the real daemon,
// runner and demo agent. The agent's write waits in the inbox (not on the
// container's stdout: the journal holds only spec messages from it); bad
// answers (an option the agent did not offer, an unknown id) are refused
// with a clear error; aimid is killed with -9 while the request waits and
// the restarted daemon shows the same request again (the runner sends it
// again; it is dated at its new arrival) and takes the answer. The
// agent's second request (its terminal command) is answered with
// --all-from; events carry the request and the answer; an answer to the
// finished container is refused.
func TestInboxAnswersFromTheCLIAcrossAKill9(t *testing.T) {
	parallel(t)
	if testing.Short() {
		t.Skip("builds the sandbox image and runs real containers")
	}
	image := sandboxImage(t)
	repo, _ := inboxRepo(t, "ask", "[demo:ask-exec]")
	dir := shortDir(t)
	sock := filepath.Join(dir, "aimid.sock")
	dataDir := filepath.Join(dir, "data")
	policy := []string{"AIMI_AGENT_PERMISSION_POLICY=ask", "AIMI_AGENT_ASK_TIMEOUT=10m"}
	p := launch(t, daemonOpts{Sock: sock, DataDir: dataDir, Image: image, Local: true, Env: policy})
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	run, _ := recordingAimi(ctx, repo, sock)
	if code, out, errOut := run("swarm", "start", "--all", "--local"); code != 0 {
		t.Fatalf("start: exit %d\n%s\n%s", code, out, errOut)
	}
	before := collectEvents(ctx, t, sock, repo)
	reqs := waitInbox(t, run, 3*time.Minute, "the agent's write request", func(r []api.PermissionRequest) bool { return len(r) == 1 })
	w := reqs[0]
	checkFirstRequestAndRefusals(t, run, w)

	p.cmd.Process.Signal(syscall.SIGKILL)
	_ = p.wait(t)
	launch(t, daemonOpts{Sock: sock, DataDir: dataDir, Image: image, Local: true, Env: policy})
	waitInbox(t, run, 2*time.Minute, "the same request after the restart", func(r []api.PermissionRequest) bool {
		// Dated at its arrival again: the daemon's clock decides expiry.
		return len(r) == 1 && r[0].ID == w.ID && r[0].Title == w.Title
	})
	events := collectEvents(ctx, t, sock, repo) // the first stream ended with the daemon
	if code, out, errOut := run("swarm", "answer", w.ID, "allow"); code != 0 || !strings.Contains(out, "answered allow") {
		t.Fatalf("answer: exit %d\n%s\n%s", code, out, errOut)
	}
	x := waitInbox(t, run, 2*time.Minute, "the terminal command's request", func(r []api.PermissionRequest) bool {
		return len(r) == 1 && r[0].Kind == "execute"
	})[0]
	if x.Command != "git status --short" {
		t.Errorf("the execute request names command %q", x.Command)
	}
	view := waitFor(t, sock, repo, time.Minute, "the container listed", func(v api.SwarmView) bool { return len(v.Containers) == 1 })
	name := view.Containers[0].Name
	if code, out, errOut := run("swarm", "answer", "--all-from", name, "reject"); code != 0 || !strings.Contains(out, x.ID+" ("+name+"): answered skip") {
		t.Fatalf("answer --all-from: exit %d\n%s\n%s", code, out, errOut)
	}
	view = waitFor(t, sock, repo, 3*time.Minute, "the container exited", allExited)
	if d := view.Containers[0]; d.Status != string(state.StatusCompleted) {
		t.Errorf("container %s: %s %+v", d.Name, d.Status, d.Errors)
	}
	if code, _, errOut := run("swarm", "answer", x.ID, "allow"); code == 0 || !strings.Contains(errOut, "no pending request") {
		t.Errorf("an answer to the finished container: exit %d %s", code, errOut)
	}
	code, logs, _ := run("swarm", "logs", name)
	for _, want := range []string{"permission request " + w.ID + " waits for a person", `a person chose "allow"`, `a person chose "skip"`} {
		if code != 0 || !strings.Contains(logs, want) {
			t.Errorf("logs lack %q:\n%s", want, logs)
		}
	}
	checkJournalStdoutIsSpec(t, repo)
	waitPermissionEvents(t, before, events, w, x)
}

// checkFirstRequestAndRefusals checks the agent's write request w, that
// the inbox lists it, and that an option the agent did not offer and an
// unknown id are refused.
func checkFirstRequestAndRefusals(t *testing.T, run func(args ...string) (int, string, string), w api.PermissionRequest) {
	t.Helper()
	if w.Kind != "edit" || !strings.Contains(w.Title, "Write") || w.StoryID != "US-001" || len(w.Options) != 2 || len(w.Paths) != 1 {
		t.Errorf("the write request: %+v", w)
	}
	if code, out, errOut := run("swarm", "inbox"); code != 0 || !strings.Contains(out, w.ID) || !strings.Contains(out, "allow_once") {
		t.Errorf("inbox: exit %d\n%s\n%s", code, out, errOut)
	}
	if code, _, errOut := run("swarm", "answer", w.ID, "maybe"); code == 0 || !strings.Contains(errOut, `option "maybe" is not one the agent offered`) {
		t.Errorf("an option the agent did not offer: exit %d %s", code, errOut)
	}
	if code, _, errOut := run("swarm", "answer", "0123456789", "allow"); code == 0 || !strings.Contains(errOut, "no pending request 0123456789") {
		t.Errorf("an unknown id: exit %d %s", code, errOut)
	}
}

// waitPermissionEvents waits for w's request on the first daemon's event
// stream (before) and x's answer by a person on the second one (events).
func waitPermissionEvents(t *testing.T, before, events *eventLog, w, x api.PermissionRequest) {
	t.Helper()
	// The first daemon's stream opened before the container started; the
	// second one opened before the first answer to the restarted daemon.
	before.wait(t, func(es []api.Event) bool {
		for _, e := range es {
			if e.Kind == api.EventPermissionRequested && e.Request != nil && e.Request.ID == w.ID && e.Request.Title == w.Title {
				return true
			}
		}
		return false
	})
	events.wait(t, func(es []api.Event) bool {
		for _, e := range es {
			if e.Kind == api.EventPermissionAnswered && e.AnsweredBy == "person" && e.RequestID == x.ID && e.Option == "skip" {
				return true
			}
		}
		return false
	})
}

// TestInboxTimeoutFallsBackToRejectAndNotifies: nobody answers; after
// agent.ask_timeout the fallback (reject) answers, the journal says so,
// and the agent, refused, fails its story (the run itself completes). A
// webhook receiver gets the request, the container's end and the swarm's
// end, each naming the repository, swarm and board link, none with a
// secret of agent.env or a control character.
func TestInboxTimeoutFallsBackToRejectAndNotifies(t *testing.T) {
	parallel(t)
	if testing.Short() {
		t.Skip("builds the sandbox image and runs real containers")
	}
	image := sandboxImage(t)
	repo, _ := inboxRepo(t, "timeout", "")
	hook := newHookReceiver(t)
	dir := shortDir(t)
	sock := filepath.Join(dir, "aimid.sock")
	config := "agent:\n  kind: demo\n  env:\n    AIMI_TEST_KEY: sk-test-NOTICESECRET\ngit:\n  mode: local\nnotify:\n  webhooks: [" + hook.url + "/hooks/T0/B0/HOOKTOKEN]\n  board_url: http://127.0.0.1:8080/\n"
	launch(t, daemonOpts{
		Sock:     sock,
		DataDir:  filepath.Join(dir, "data"),
		Config:   config,
		LogLevel: "debug",
		Base:     localEnv(),
		Env: []string{
			"AIMI_SANDBOX_IMAGE=" + image, "AIMI_SANDBOX_MEMORY=512m", "AIMI_SANDBOX_SWAP=512m",
			"AIMI_SANDBOX_CPUS=1", "AIMI_SANDBOX_PIDS=256", "AIMI_AGENT_PERMISSION_POLICY=ask-kinds:edit",
			"AIMI_AGENT_ASK_TIMEOUT=3s",
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	run, _ := recordingAimi(ctx, repo, sock)
	if code, out, errOut := run("swarm", "start", "--all", "--local"); code != 0 {
		t.Fatalf("start: exit %d\n%s\n%s", code, out, errOut)
	}
	view := waitFor(t, sock, repo, 4*time.Minute, "the container exited", allExited)
	d := view.Containers[0]
	if p := view.State.Containers[0].StoryProgress; p.Failed != 1 {
		t.Errorf("container %s: %s %+v, want its only story failed (refused)", d.Name, d.Status, p)
	}
	code, logs, _ := run("swarm", "logs", d.Name)
	if code != 0 || !strings.Contains(logs, "nobody answered within 3s (agent.ask_timeout); the fallback reject chose option \"reject\"") {
		t.Errorf("logs lack the fallback:\n%s", logs)
	}
	notices := hook.wait(t, []string{"permission-request-waiting", "container-finished", "swarm-finished"})
	for _, b := range notices {
		var n struct{ Kind, Text, Repo, SwarmID, Board string }
		if err := json.Unmarshal([]byte(b), &n); err != nil || n.Repo != repo || n.SwarmID == "" || n.Board != "http://127.0.0.1:8080/" || n.Text == "" {
			t.Errorf("notice %v: %s", err, b)
		}
		if strings.Contains(b, "NOTICESECRET") || strings.Contains(b, "HOOKTOKEN") {
			t.Errorf("a notice carries a secret: %s", b)
		}
		for _, r := range n.Text {
			if unicode.IsControl(r) {
				t.Errorf("control character %U in notice %s", r, b)
			}
		}
	}
}

type hookReceiver struct {
	url    string
	mu     sync.Mutex
	bodies []string
}

// newHookReceiver is a webhook endpoint on the loopback (aimid runs on the
// host) that keeps every body.
func newHookReceiver(t *testing.T) *hookReceiver {
	h := &hookReceiver{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		h.mu.Lock()
		h.bodies = append(h.bodies, string(b))
		h.mu.Unlock()
	}))
	t.Cleanup(srv.Close)
	h.url = srv.URL
	return h
}

// wait returns every notice once notices of each kind arrived.
func (h *hookReceiver) wait(t *testing.T, kinds []string) []string {
	t.Helper()
	var got []string
	testwait.Eventually(t, 2*time.Minute, fmt.Sprintf("notices of kinds %v", kinds), func() error {
		h.mu.Lock()
		got = append([]string(nil), h.bodies...)
		h.mu.Unlock()
		for _, k := range kinds {
			if !slices.ContainsFunc(got, func(b string) bool { return strings.Contains(b, `"kind":"`+k+`"`) }) {
				return fmt.Errorf("notices: %q", got)
			}
		}
		return nil
	})
	return got
}

// checkJournalStdoutIsSpec: every stdout line of every journal is a valid
// spec message: the requests did not travel on stdout.
func checkJournalStdoutIsSpec(t *testing.T, repo string) {
	t.Helper()
	sw := validState(t, repo)
	for _, c := range sw.Containers {
		recs, err := state.ReadJournal(state.Open(repo).JournalPath(contract.Sandbox{Swarm: sw.SwarmID, Container: c.ContainerName}))
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			if r.Stream == state.StreamStdout && !r.Valid {
				t.Errorf("%s: stdout line not a spec message: %s %s", c.ContainerName, r.Reason, r.Raw)
			}
		}
	}
}

type eventLog struct {
	mu sync.Mutex
	es []api.Event
}

// collectEvents records the repo's events until ctx ends or the daemon goes.
func collectEvents(ctx context.Context, t *testing.T, sock, repo string) *eventLog {
	l := &eventLog{}
	c := daemon.NewClient(sock)
	t.Cleanup(c.Close)
	opened := make(chan struct{})
	ended := make(chan error, 1)
	go func() {
		ended <- c.EventsOpened(ctx, repo, func() { close(opened) }, func(e api.Event) error {
			l.mu.Lock()
			l.es = append(l.es, e)
			l.mu.Unlock()
			return nil
		})
	}()
	// The daemon subscribes before it answers: once opened, no event the
	// test then causes can be missed (a stream still opening under load
	// lost a person's answer here).
	select {
	case <-opened:
	case err := <-ended:
		t.Fatalf("the event stream ended before it opened: %v", err)
	case <-time.After(time.Minute):
		t.Fatal("the event stream did not open within a minute")
	}
	return l
}

func (l *eventLog) wait(t *testing.T, cond func([]api.Event) bool) []api.Event {
	t.Helper()
	var es []api.Event
	testwait.Eventually(t, time.Minute, "the events awaited", func() error {
		l.mu.Lock()
		es = append([]api.Event(nil), l.es...)
		l.mu.Unlock()
		if !cond(es) {
			return fmt.Errorf("events: %+v", es)
		}
		return nil
	})
	return es
}
