package runner

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/acpmsg"
	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/tasks"
	"github.com/aimi-tools/swarm/usage"
	acp "github.com/coder/acp-go-sdk"
)

// stallScript is the scripted agent's part for the stall watchdog:
//
//	stall        answers the prompt never (one chunk, then silence); ends
//	             the turn as cancelled on session/cancel
//	stall-deaf   like stall, but ignores session/cancel too
//	stall-once   stalls when the workspace has no file "attempted" (and
//	             writes it), else ends its turn at once
//	busy         reports a tool call in progress and then keeps silent
//	loop         reports the same tool call (same input) again and again
//	cost         reports its session's cost (usage_update) and ends the turn
type stallScript struct {
	mode     string
	sid      string
	send     func(any)
	answer   func(json.RawMessage, any)
	promptID json.RawMessage
}

func newStallScript(mode, sid string, send func(any), answer func(json.RawMessage, any)) *stallScript {
	return &stallScript{mode: mode, sid: sid, send: send, answer: answer}
}

func (s *stallScript) update(u map[string]any) {
	s.send(map[string]any{"jsonrpc": "2.0", "method": "session/update", "params": map[string]any{"sessionId": s.sid, "update": u}})
}

// handle reports whether it took the message.
func (s *stallScript) handle(method string, id json.RawMessage) bool {
	if !strings.HasPrefix(s.mode, "stall") && s.mode != "busy" && s.mode != "loop" && s.mode != "cost" {
		return false
	}
	if s.mode == "cost" && method == "session/prompt" {
		s.update(map[string]any{"sessionUpdate": "usage_update", "used": 1000, "size": 200000, "cost": map[string]any{"amount": 0.1, "currency": "USD"}})
		s.update(map[string]any{"sessionUpdate": "agent_message_chunk", "content": map[string]any{"type": "text", "text": "Agent-reported cost: 0.000001 USD. done"}})
		s.update(map[string]any{"sessionUpdate": "usage_update", "used": 2000, "size": 200000, "cost": map[string]any{"amount": 0.25, "currency": "USD"}})
		s.answer(id, map[string]any{"stopReason": "end_turn"})
		return true
	}
	switch method {
	case "session/prompt":
		s.promptID = id
		if s.mode == "stall-once" {
			if _, err := os.Stat("attempted"); err == nil {
				s.answer(id, map[string]any{"stopReason": "end_turn"})
				return true
			}
			_ = os.WriteFile("attempted", []byte("x"), 0o644)
		}
		s.update(map[string]any{"sessionUpdate": "agent_message_chunk", "content": map[string]any{"type": "text", "text": "thinking..."}})
		switch s.mode {
		case "busy":
			s.update(map[string]any{"sessionUpdate": "tool_call", "toolCallId": "t1", "title": "make test", "kind": "execute", "status": "in_progress"})
		case "loop":
			for i := range 12 {
				s.update(map[string]any{"sessionUpdate": "tool_call", "toolCallId": "t" + strings.Repeat("x", i), "title": "Read main.go", "kind": "read",
					"status": "completed", "rawInput": map[string]any{"path": "main.go"}})
			}
		}
		return true
	case "session/cancel":
		if s.mode != "stall-deaf" && s.promptID != nil {
			s.answer(s.promptID, map[string]any{"stopReason": "cancelled"})
			s.promptID = nil
		}
		return true
	}
	return false
}

func TestStalledTurnIsCancelledWithEvidence(t *testing.T) {
	for _, mode := range []string{"stall", "stall-deaf"} {
		t.Run(mode, func(t *testing.T) {
			b, dir := scriptBackend(t, mode, time.Minute)
			b.stallTimeout = 2 * time.Second
			start := time.Now()
			o := b.runStory(context.Background(), "US-001", "go", dir)
			if o.stalled == "" || o.err != nil {
				t.Fatalf("outcome %+v, err %v: want a stall", o, o.err)
			}
			for _, want := range []string{"no ACP traffic for", "agent.stall_timeout 2s", "no tool call or terminal running"} {
				if !strings.Contains(o.stalled, want) {
					t.Errorf("evidence %q lacks %q", o.stalled, want)
				}
			}
			if took := time.Since(start); took < 2*time.Second || took > 2*time.Minute {
				t.Errorf("took %v", took)
			}
		})
	}
}

func TestBusyToolCallIsNoStall(t *testing.T) {
	b, dir := scriptBackend(t, "busy", time.Minute)
	b.stallTimeout = time.Second
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	o := b.runStory(ctx, "US-001", "go", dir)
	if o.stalled != "" || o.stop != acp.StopReasonCancelled {
		t.Fatalf("outcome %+v: a running tool call must hold the watchdog off until the stop", o)
	}
}

func TestRepeatedToolCallIsALoop(t *testing.T) {
	b, dir := scriptBackend(t, "loop", time.Minute)
	b.loopLimit = 8
	o := b.runStory(context.Background(), "US-001", "go", dir)
	for _, want := range []string{"loop:", `tool call "Read main.go"`, `{"path":"main.go"}`, "repeated 8 times in a row", "agent.loop_limit 8"} {
		if !strings.Contains(o.stalled, want) {
			t.Errorf("evidence %q lacks %q", o.stalled, want)
		}
	}
}

func TestWatchdogFromEnv(t *testing.T) {
	env := map[string]string{contract.EnvStallTimeout: "90s", contract.EnvLoopLimit: "0"}
	c, err := ConfigFromEnv(func(k string) string { return env[k] })
	if err != nil || c.StallTimeout != 90*time.Second || c.LoopLimit != 0 {
		t.Fatalf("config %v %v, %v", c.StallTimeout, c.LoopLimit, err)
	}
	c, err = ConfigFromEnv(func(string) string { return "" })
	c.setDefaults()
	if err != nil || c.StallTimeout != DefaultStallTimeout || c.LoopLimit != DefaultLoopLimit {
		t.Fatalf("defaults %v %v, %v", c.StallTimeout, c.LoopLimit, err)
	}
	for k, v := range map[string]string{contract.EnvStallTimeout: "soon", contract.EnvLoopLimit: "-1"} {
		if _, err := ConfigFromEnv(func(q string) string { return map[string]string{k: v}[q] }); err == nil || !strings.Contains(err.Error(), k) {
			t.Errorf("%s=%s accepted: %v", k, v, err)
		}
	}
}

func stallScenario(t *testing.T, mode string) *scenario {
	t.Helper()
	s := newScenario(t, oneStory(t), "")
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	s.cfg.Agent = AgentACP
	s.cfg.AgentCommand = self
	s.cfg.Env = append(s.cfg.Env, envScriptAgent+"="+mode)
	s.cfg.StallTimeout = 2 * time.Second
	s.cfg.StopGrace = 2 * time.Second
	return s
}

func TestStalledStoryIsRetriedOnce(t *testing.T) {
	s := stallScenario(t, "stall-once")
	_, msgs := runScenario(t, context.Background(), s, s.request(t))
	c := completionOf(t, msgs)
	if c.Status != acpmsg.CompletionCompleted || len(c.Errors) != 0 {
		t.Fatalf("completion %+v", c)
	}
	retried := false
	for _, p := range progressOf(msgs) {
		if p.status == acpmsg.StoryInProgress && strings.Contains(p.output, "no ACP traffic for") && strings.Contains(p.output, "retrying the story once") {
			retried = true
		}
	}
	if !retried {
		t.Errorf("no progress-update with the stall's evidence and the retry: %+v", progressOf(msgs))
	}
	if got := finalStatuses(t, s); got["US-001"] != tasks.Completed {
		t.Fatalf("statuses %v", got)
	}
}

func TestStoryThatStallsTwiceFailsWithAgentStalled(t *testing.T) {
	s := stallScenario(t, "stall")
	_, msgs := runScenario(t, context.Background(), s, s.request(t))
	c := completionOf(t, msgs)
	errs := strings.Join(c.Errors, "\n")
	if !strings.Contains(errs, "US-001: "+acpmsg.CodeAgentStalled+": stalled: no ACP traffic for") {
		t.Fatalf("errors %q", c.Errors)
	}
	if got := finalStatuses(t, s); got["US-001"] != tasks.Failed {
		t.Fatalf("statuses %v", got)
	}
}

func TestAgentReportedCostLeadsTheStoryOutput(t *testing.T) {
	s := stallScenario(t, "cost")
	_, msgs := runScenario(t, context.Background(), s, s.request(t))
	var out string
	for _, p := range progressOf(msgs) {
		if p.status == acpmsg.StoryCompleted {
			out = p.output
		}
	}
	c, ok := usage.ParseAgentCost(out)
	if !ok || c != (usage.AgentCost{Amount: 0.25, Currency: "USD"}) {
		t.Fatalf("cost %+v %v from output %q: want the last usage_update's 0.25 USD, not the agent's text", c, ok, out)
	}
}
