package gitserve

import (
	"bytes"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"unicode"

	"github.com/aimi-tools/swarm/contract"
)

// refusal is one report OnRefused heard.
type refusal struct {
	sb     contract.Sandbox
	reason string
}

// heardRefusals sets s's OnRefused to a list the test reads.
func heardRefusals(s *Service) func() []refusal {
	var mu sync.Mutex
	var got []refusal
	s.OnRefused(func(sb contract.Sandbox, reason string) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, refusal{sb, reason})
	})
	return func() []refusal {
		mu.Lock()
		defer mu.Unlock()
		return append([]refusal(nil), got...)
	}
}

// A push to another branch is reported to OnRefused with the container
// whose token it carried and the service's reason; a second one within
// ten seconds is not (a looping sandbox floods no journal), nor is a
// request without a valid token, which names no container.
func TestRefusedPushIsReportedWithItsContainer(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s, _ := newService(t, Options{})
	if err := s.ListenOn(ctx, "127.0.0.1"); err != nil {
		t.Fatal(err)
	}
	cb := contract.ContainerBranch{Repo: newRepo(t), Swarm: "swarm-r", Container: "aimi-r", Branch: "mine"}
	g, err := s.Grant(ctx, cb, "")
	if err != nil {
		t.Fatal(err)
	}
	heard := heardRefusals(s)
	push := func(token, body string) int {
		req := httptest.NewRequestWithContext(ctx, "POST", "https://127.0.0.1/swarm-r.git/git-receive-pack", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, req)
		return rec.Code
	}
	other := pkt(oidA+" "+oidB+" refs/heads/main\x00report-status\n") + "0000"
	push(g.Token, other)
	push(g.Token, other)
	push("not-a-token", other)
	got := heard()
	if len(got) != 1 {
		t.Fatalf("reports %+v; want one", got)
	}
	if got[0].sb != cb.Sandbox() || !strings.Contains(got[0].reason, "refs/heads/main") || !strings.Contains(got[0].reason, "may push only refs/heads/mine") {
		t.Errorf("report %+v; want %v and a reason naming refs/heads/main and refs/heads/mine", got[0], cb.Sandbox())
	}
}

// What a sandbox names in a refused push reaches the report bounded and
// with no control character: long refs are clipped and only the first
// three named, a malformed command is quoted.
func TestRefusalReasonsAreBoundedAndClean(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s, _ := newService(t, Options{})
	if err := s.ListenOn(ctx, "127.0.0.1"); err != nil {
		t.Fatal(err)
	}
	g, err := s.Grant(ctx, contract.ContainerBranch{Repo: newRepo(t), Swarm: "swarm-c", Container: "aimi-c", Branch: "mine"}, "")
	if err != nil {
		t.Fatal(err)
	}
	heard := heardRefusals(s)
	long := "refs/heads/" + strings.Repeat("x", 500)
	var many strings.Builder
	for i := range 6 {
		many.WriteString(pkt(oidA + " " + oidB + " " + long + itoa(i) + "\n"))
	}
	bodies := []string{
		many.String() + "0000",
		pkt(oidA+" "+oidB+" refs/heads/\x1b[31mred\x07\n") + "0000",
	}
	for _, body := range bodies {
		req := httptest.NewRequestWithContext(ctx, "POST", "https://127.0.0.1/swarm-c.git/git-receive-pack", bytes.NewReader([]byte(body)))
		req.Header.Set("Authorization", "Bearer "+g.Token)
		s.ServeHTTP(httptest.NewRecorder(), req)
	}
	got := heard()
	if len(got) != 2 {
		t.Fatalf("reports %+v; want two (refused refs, malformed)", got)
	}
	if !strings.Contains(got[0].reason, "and 3 more") {
		t.Errorf("reason %q does not say how many refs it left out", got[0].reason)
	}
	for _, r := range got {
		t.Logf("reported: %s", r.reason)
		if len(r.reason) > maxRefusalReason || strings.IndexFunc(r.reason, unicode.IsControl) >= 0 {
			t.Errorf("reason %q: %d bytes or a control character; want at most %d and none", r.reason, len(r.reason), maxRefusalReason)
		}
	}
}
