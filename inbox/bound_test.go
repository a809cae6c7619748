package inbox

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/internal/redact"
)

// fakeClock is a clock the test moves.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *fakeClock) add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// sendAsk serves one AskRequest from container ctr and returns its status.
func sendAsk(t *testing.T, in *Inbox, ctr string, a contract.AskRequest, ctx context.Context) int {
	t.Helper()
	b, _ := json.Marshal(a)
	w := httptest.NewRecorder()
	in.ServeAsk(w, httptest.NewRequestWithContext(ctx, http.MethodPost, contract.AskPath, bytes.NewReader(b)),
		contract.Caller{RepoPath: "/repo", SwarmID: "sw", Container: ctr})
	return w.Code
}

func ask(id, title, asked string) contract.AskRequest {
	return contract.AskRequest{ID: id, StoryID: "US-001", AskedAt: asked, Question: contract.AskQuestion{Title: title, Kind: "execute",
		Command: "echo " + title, Options: []contract.AskOption{{ID: "yes", Name: "Allow " + title, Kind: "allow_once"}, {ID: "no", Name: "Reject", Kind: "reject_once"}}}}
}

// TestARequestIsDatedAtItsArrival: a request dated in the past or the
// future waits the whole agent.ask_timeout from its arrival.
func TestARequestIsDatedAtItsArrival(t *testing.T) {
	clock := &fakeClock{now: time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)}
	in := New(Config{Timeout: time.Minute, Now: clock.Now})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go sendAsk(t, in, "c1", ask("00000000000000a1", "past", "2000-01-01T00:00:00Z"), ctx)
	go sendAsk(t, in, "c1", ask("00000000000000a2", "future", "2099-01-01T00:00:00Z"), ctx)
	for _, r := range waitPending(t, in, 2) {
		if !r.AskedAt.Equal(clock.Now()) || !r.Deadline.Equal(clock.Now().Add(time.Minute)) {
			t.Errorf("request %q dated %v, deadline %v: want its arrival %v", r.Title, r.AskedAt, r.Deadline, clock.Now())
		}
	}
	in.expire(ctx)
	waitPending(t, in, 2)
}

// TestSecretsAreRedactedAtIntake: the text people see of a request (its
// title, command, paths, option names, the journal's lines) carries the
// marker, not the value; an option id with the value is refused.
func TestSecretsAreRedactedAtIntake(t *testing.T) {
	n := &notes{}
	in := New(Config{Journal: n.journal, Redact: redact.New(map[string]string{"TOKEN": "hunter2-s3cret"})})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a := ask("00000000000000b1", "use HUNTER2-S3CRET", "")
	a.Question.Paths = []string{"/w/hunter2 s3cret"}
	go sendAsk(t, in, "c1", a, ctx)
	r := waitPending(t, in, 1)[0]
	all := fmt.Sprintf("%+v %s", r, n.all())
	if strings.Contains(strings.ToLower(all), "s3cret") || !strings.Contains(r.Title, "[secret:TOKEN]") || r.Paths[0] != "/w/[secret:TOKEN]" {
		t.Errorf("the request carries the secret or no marker: %s", all)
	}
	bad := ask("00000000000000b2", "x", "")
	bad.Question.Options[0].ID = "hunter2-s3cret"
	if code := sendAsk(t, in, "c1", bad, ctx); code != http.StatusBadRequest {
		t.Errorf("an option id with the secret: HTTP %d, want 400", code)
	}
	if strings.Contains(strings.ToLower(n.all()), "s3cret") {
		t.Errorf("the journal carries the secret: %s", n.all())
	}
}

// TestJournalLinesAreBoundedPerContainer: requests that time out fast
// write up to linesPerWindow lines a window; the rest are counted in one
// line when the window ends.
func TestJournalLinesAreBoundedPerContainer(t *testing.T) {
	n := &notes{}
	clock := &fakeClock{now: time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)}
	in := New(Config{Journal: n.journal, Timeout: 100 * time.Millisecond, Now: clock.Now})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const asks = 100
	for i := range asks {
		done := make(chan struct{})
		go func() { sendAsk(t, in, "c1", ask(fmt.Sprintf("%016x", i), "x", ""), ctx); close(done) }()
		waitPending(t, in, 1)
		clock.add(200 * time.Millisecond)
		in.expire(ctx)
		<-done
	}
	if c := strings.Count(n.all(), "\n") + 1; c != linesPerWindow {
		t.Errorf("%d lines in the window, want %d:\n%s", c, linesPerWindow, n.all())
	}
	clock.add(linesWindow)
	in.flushLines(ctx, false)
	want := fmt.Sprintf("%d more permission request events", 2*asks-linesPerWindow)
	if !strings.Contains(n.all(), want) {
		t.Errorf("journal lacks %q:\n%s", want, n.all())
	}
}
