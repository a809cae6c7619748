package sandboxnet

import (
	"bufio"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/configs"
	"github.com/aimi-tools/swarm/contract"
)

// goBudgets answers every budget question with go.
type goBudgets struct{}

func (goBudgets) ServeBudget(w http.ResponseWriter, r *http.Request, _ contract.Caller) {
	io.WriteString(w, `{"state":"go"}`)
}

// serveTestBudgetSocket serves a budget socket as the daemon does for one
// sandbox and returns its path.
func serveTestBudgetSocket(t *testing.T) string {
	t.Helper()
	n := newNet(Options{Config: &configs.Config{}, Log: slog.New(slog.DiscardHandler)})
	n.budgets.set(goBudgets{})
	sock := filepath.Join(shortDir(t), "budget.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go n.serveBudget(ln, contract.Sandbox{Swarm: "s", Container: "c"})
	return sock
}

// holdBudgetSocket opens a connection that sends a question's head and
// never its body; the returned channel is closed when the daemon closes it.
func holdBudgetSocket(t *testing.T, sock string) <-chan struct{} {
	t.Helper()
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	fmt.Fprint(c, "POST "+contract.BudgetPath+" HTTP/1.1\r\nHost: budget\r\nContent-Length: 100\r\n\r\n")
	done := make(chan struct{})
	go func() {
		defer close(done)
		io.Copy(io.Discard, c)
	}()
	return done
}

// askBudgetSocket sends one whole question on a new connection and
// reports whether it was answered.
func askBudgetSocket(sock string) bool {
	c, err := net.Dial("unix", sock)
	if err != nil {
		return false
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	q := `{"stories":[]}`
	fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: budget\r\nContent-Length: %d\r\n\r\n%s", contract.BudgetPath, len(q), q)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return false
	}
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode == http.StatusOK && strings.Contains(string(b), `"go"`)
}

// Connections that hold the budget socket (a question's head, never its
// body; more of them than it serves at once) do not keep the runner's
// question out: it takes the place of the one that waited longest, at
// once, and every held connection is closed within the bound on a whole
// question's arrival.
func TestHeldBudgetSocketStillAnswersAQuestion(t *testing.T) {
	t.Parallel()
	sock := serveTestBudgetSocket(t)
	var held []<-chan struct{}
	for range contract.ChannelConns(contract.BudgetSocket) + 4 {
		held = append(held, holdBudgetSocket(t, sock))
	}
	start := time.Now()
	answered := false
	for !answered && time.Since(start) < budgetReadTimeout {
		answered = askBudgetSocket(sock)
		if !answered {
			time.Sleep(100 * time.Millisecond)
		}
	}
	if !answered {
		t.Fatalf("no answer within %s while the socket was held", budgetReadTimeout)
	}
	deadline := start.Add(budgetReadTimeout + 10*time.Second)
	for i, h := range held {
		select {
		case <-h:
		case <-time.After(time.Until(deadline)):
			t.Fatalf("held connection %d still open %s after it was opened", i, time.Since(start).Round(time.Second))
		}
	}
}
