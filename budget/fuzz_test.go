package budget

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/contract"
)

// FuzzServeBudget sends arbitrary bodies as a container's budget question
// (the container is untrusted): the answer is a budget answer or a
// refusal, never a panic, and what the question says about its stories in
// flight never makes Refusal misbehave.
func FuzzServeBudget(f *testing.F) {
	now := time.Now().UTC()
	f.Add(`{"stories":[]}`)
	f.Add(`{"stories":[{"id":"US-001","start":"` + now.Add(-time.Hour).Format(time.RFC3339Nano) + `","end":"` + now.Format(time.RFC3339Nano) + `"}],"running":[{"id":"US-002","start":"` + now.Format(time.RFC3339Nano) + `"}]}`)
	f.Add(`{"running":[{"id":"US-002\u001b[2J","start":"0001-01-01T00:00:00Z"}]}`)
	f.Add(`{"stories":null,"running":{}}`)
	f.Fuzz(func(t *testing.T, body string) {
		k := keeper(&Limits{Swarm: 1, Story: 0.5, Grace: 0.1}, nil)
		sb := contract.Sandbox{Swarm: "s", Container: "a"}
		k.Add(sb, time.Now(), 0.3)
		w := httptest.NewRecorder()
		k.ServeBudget(w, httptest.NewRequest(http.MethodPost, contract.BudgetPath, strings.NewReader(body)), contract.Caller{RepoPath: "/r", SwarmID: "s", Container: "a"})
		if w.Code != http.StatusOK && w.Code != http.StatusBadRequest {
			t.Fatalf("HTTP %d", w.Code)
		}
		if why := k.Refusal(sb); why != "" {
			t.Fatalf("0.3 spent refused: %q", why)
		}
		_ = k.Check(context.Background(), "/r", sb, contract.BudgetRequest{})
	})
}
