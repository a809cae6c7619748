package acpclient

import (
	"context"
	"errors"
	"testing"
	"time"

	acp "github.com/coder/acp-go-sdk"
)

type fakeAsker struct {
	answer string
	err    error
	asked  []Question
}

func (f *fakeAsker) Ask(_ context.Context, q Question) (string, error) {
	f.asked = append(f.asked, q)
	return f.answer, f.err
}

// TestAskPolicyPutsOnlyItsKindsToAPerson: ask-kinds:execute asks about
// execute calls (with the command and options) and allows the rest; a
// person's answer selects that option; no answer, or an answer naming no
// offered option, rejects.
func TestAskPolicyPutsOnlyItsKindsToAPerson(t *testing.T) {
	opts := []acp.PermissionOption{
		{Kind: acp.PermissionOptionKindAllowOnce, Name: "Run", OptionId: "run"},
		{Kind: acp.PermissionOptionKindRejectOnce, Name: "Skip", OptionId: "skip"},
	}
	call := func(c *Client, kind acp.ToolKind) string {
		r, err := c.RequestPermission(context.Background(), acp.RequestPermissionRequest{SessionId: "s",
			ToolCall: acp.ToolCallUpdate{ToolCallId: "t", Kind: acp.Ptr(kind), Title: acp.Ptr("Run make"), RawInput: map[string]any{"command": "make test"}},
			Options:  opts})
		if err != nil || r.Outcome.Selected == nil {
			t.Fatalf("outcome %+v %v", r.Outcome, err)
		}
		return string(r.Outcome.Selected.OptionId)
	}
	c, _ := newTestClient(t, "ask-kinds:execute")
	f := &fakeAsker{answer: "skip"}
	c.asker = f
	if got := call(c, acp.ToolKindEdit); got != "run" || len(f.asked) != 0 {
		t.Errorf("edit: %s, asked %d times", got, len(f.asked))
	}
	if got := call(c, acp.ToolKindExecute); got != "skip" || len(f.asked) != 1 || f.asked[0].Command != "make test" || len(f.asked[0].Options) != 2 {
		t.Errorf("execute: %s, asked %+v", got, f.asked)
	}
	f.answer = "run"
	if got := call(c, acp.ToolKindExecute); got != "run" {
		t.Errorf("allowed by a person: %s", got)
	}
	f.answer = "bogus"
	if got := call(c, acp.ToolKindExecute); got != "skip" {
		t.Errorf("an option not offered: %s, want the rejection", got)
	}
	f.err = errors.New("daemon refused")
	if got := call(c, acp.ToolKindExecute); got != "skip" {
		t.Errorf("no answer: %s, want the rejection", got)
	}
	c.asker = nil
	if got := call(c, acp.ToolKindExecute); got != "skip" {
		t.Errorf("nobody to ask: %s, want the rejection", got)
	}
	for _, s := range []string{"ask", "ask-kinds:execute,delete"} {
		if p, err := ParsePolicy(s); err != nil || p.String() != s || !p.AsksAnyone() {
			t.Errorf("ParsePolicy(%q) = %v, %v", s, p, err)
		}
	}
	if _, err := ParsePolicy("ask-kinds:shell"); err == nil {
		t.Error("ask-kinds with an unknown kind parsed")
	}
}

type blockingAsker struct{ release chan struct{} }

func (b blockingAsker) Ask(ctx context.Context, q Question) (string, error) {
	<-b.release
	return "yes", nil
}

// TestWaitingForAPersonIsBusy: while a request waits for a person the
// client reports it, so the stall watchdog does not take the silence for
// a stall.
func TestWaitingForAPersonIsBusy(t *testing.T) {
	c, _ := newTestClient(t, "ask")
	b := blockingAsker{release: make(chan struct{})}
	c.asker = b
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = c.RequestPermission(context.Background(), acp.RequestPermissionRequest{SessionId: "s",
			ToolCall: acp.ToolCallUpdate{ToolCallId: "t"}, Options: []acp.PermissionOption{{Kind: acp.PermissionOptionKindAllowOnce, OptionId: "yes"}}})
	}()
	for c.Activity().Asking != 1 {
		select {
		case <-done:
			t.Fatal("the request returned before the person answered")
		case <-time.After(time.Millisecond):
		}
	}
	if !c.Activity().Busy() {
		t.Error("a client waiting for a person is not busy")
	}
	close(b.release)
	<-done
	if a := c.Activity(); a.Asking != 0 {
		t.Errorf("asking %d after the answer", a.Asking)
	}
}
