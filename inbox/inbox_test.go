package inbox

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/internal/testwait"
)

type notes struct {
	mu    sync.Mutex
	lines []string
}

func (n *notes) journal(_ context.Context, sb contract.Sandbox, text string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.lines = append(n.lines, sb.Container+": "+text)
}

func (n *notes) all() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return strings.Join(n.lines, "\n")
}

func askBody(id string) []byte {
	b, _ := json.Marshal(contract.AskRequest{ID: id, StoryID: "US-001", AskedAt: time.Now().UTC().Format(time.RFC3339Nano),
		Question: contract.AskQuestion{Title: "Write a.md", Kind: "edit", Paths: []string{"/workspace/a.md"},
			Options: []contract.AskOption{{ID: "yes", Name: "Allow", Kind: "allow_once"}, {ID: "no", Name: "Reject", Kind: "reject_once"}}}})
	return b
}

// send serves one ask from ctr and returns its status and answer, waiting
// at most wait (the handler holds a request up to hold).
func send(t *testing.T, in *Inbox, ctr, id string, ctx context.Context) (int, contract.AskAnswer) {
	t.Helper()
	r := httptest.NewRequestWithContext(ctx, http.MethodPost, contract.AskPath, bytes.NewReader(askBody(id)))
	w := httptest.NewRecorder()
	in.ServeAsk(w, r, contract.Caller{RepoPath: "/repo", SwarmID: "sw", Container: ctr})
	var a contract.AskAnswer
	_ = json.Unmarshal(w.Body.Bytes(), &a)
	return w.Code, a
}

func waitPending(t *testing.T, in *Inbox, n int) []api.PermissionRequest {
	t.Helper()
	var l []api.PermissionRequest
	testwait.Eventually(t, time.Minute, fmt.Sprintf("%d pending requests", n), func() error {
		if l = in.List(""); len(l) != n {
			return fmt.Errorf("pending: %+v", l)
		}
		return nil
	}, testwait.Every(10*time.Millisecond))
	return l
}

// TestAnswerReachesTheWaitingRunnerAndBadAnswersAreRefused: a waiting send
// gets the person's answer; an option the agent did not offer and an
// unknown id are refused with errors naming them, and leave it pending;
// a resend after the answer gets the same answer.
func TestAnswerReachesTheWaitingRunnerAndBadAnswersAreRefused(t *testing.T) {
	n := &notes{}
	in := New(Config{Journal: n.journal})
	got := make(chan contract.AskAnswer, 1)
	go func() {
		_, a := send(t, in, "c1", "00112233aabbccdd", context.Background())
		got <- a
	}()
	req := waitPending(t, in, 1)[0]
	if req.ID != RequestID(contract.Sandbox{Swarm: "sw", Container: "c1"}, "00112233aabbccdd") || req.StoryID != "US-001" || req.Deadline.Sub(req.AskedAt) != DefaultTimeout {
		t.Errorf("request %+v", req)
	}
	_, err := in.Answer(context.Background(), api.AnswerRequest{ID: req.ID, Option: "perhaps"})
	if !errors.Is(err, api.ErrInvalidRequest) || !strings.Contains(err.Error(), `option "perhaps" is not one the agent offered`) {
		t.Errorf("unknown option: %v", err)
	}
	if _, err := in.Answer(context.Background(), api.AnswerRequest{ID: "nope", Option: "allow"}); !errors.Is(err, api.ErrUnknownContainer) {
		t.Errorf("unknown id: %v", err)
	}
	rep, err := in.Answer(context.Background(), api.AnswerRequest{ID: req.ID, Option: "allow"})
	if err != nil || len(rep.Answered) != 1 || rep.Answered[0].OptionID != "yes" {
		t.Fatalf("answer: %+v %v", rep, err)
	}
	if a := <-got; a.State != contract.AskAnswered || a.OptionID != "yes" {
		t.Errorf("the runner got %+v", a)
	}
	if code, a := send(t, in, "c1", "00112233aabbccdd", context.Background()); code != 200 || a.OptionID != "yes" {
		t.Errorf("resend after the answer: %d %+v", code, a)
	}
	if !strings.Contains(n.all(), `a person chose "yes"`) {
		t.Errorf("journal: %s", n.all())
	}
}

// TestFloodIsBoundedPerContainer: past MaxPerContainer a container's
// requests are refused (429) and journaled in one line, while another
// container's request is still taken.
func TestFloodIsBoundedPerContainer(t *testing.T) {
	n := &notes{}
	in := New(Config{Journal: n.journal, MaxPerContainer: 3})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for i := range 3 {
		go send(t, in, "flood", fmt.Sprintf("%016x", i), ctx)
	}
	waitPending(t, in, 3)
	for i := range 50 {
		if code, _ := send(t, in, "flood", fmt.Sprintf("%016x", 100+i), ctx); code != http.StatusTooManyRequests {
			t.Fatalf("request %d past the bound: HTTP %d", i, code)
		}
	}
	go send(t, in, "quiet", "aaaaaaaaaaaaaaaa", ctx)
	waitPending(t, in, 4)
	if c := strings.Count(n.all(), "refused"); c != 1 {
		t.Errorf("%d refusal lines, want 1:\n%s", c, n.all())
	}
	in.Drop(contract.Sandbox{Swarm: "sw", Container: "flood"})
	waitPending(t, in, 1)
}

// TestTimeoutAnswersWithTheFallback: past the deadline the fallback's
// option answers and the journal says so; a dropped container's runner
// gets 410.
func TestTimeoutAnswersWithTheFallback(t *testing.T) {
	n := &notes{}
	now := time.Now()
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	in := New(Config{Journal: n.journal, Timeout: time.Minute, Now: clock})
	got := make(chan contract.AskAnswer, 1)
	go func() {
		_, a := send(t, in, "c1", "0011223344556677", context.Background())
		got <- a
	}()
	waitPending(t, in, 1)
	mu.Lock()
	now = now.Add(2 * time.Minute)
	mu.Unlock()
	in.expire(context.Background())
	if a := <-got; a.OptionID != "no" {
		t.Errorf("fallback answered %+v", a)
	}
	if !strings.Contains(n.all(), `the fallback reject chose option "no"`) {
		t.Errorf("journal: %s", n.all())
	}
	go send(t, in, "c2", "8899aabbccddeeff", context.Background())
	waitPending(t, in, 1)
	in.Drop(contract.Sandbox{Swarm: "sw", Container: "c2"})
	if code, _ := send(t, in, "c2", "8899aabbccddeeff", context.Background()); code != http.StatusGone {
		t.Errorf("a dropped container's resend: HTTP %d", code)
	}
}

func FuzzParseAsk(f *testing.F) {
	f.Add(askBody("00112233aabbccdd"))
	f.Add([]byte(`{"id":"zz","question":{"options":[]}}`))
	f.Add([]byte(`{"id":"0011223344556677","question":{"title":"\u001b[2J","options":[{"id":"a","kind":"allow_once"}]}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		req, err := ParseAsk(bytes.NewReader(b))
		if err != nil {
			return
		}
		if len(req.Question.Options) == 0 || len(req.Question.Options) > maxOptions || len(req.Question.Title) > maxTitle+3 ||
			len(req.Question.Paths) > maxPaths || len(req.Question.Command) > maxCommand+3 {
			t.Fatalf("bounds not kept: %+v", req)
		}
	})
}
