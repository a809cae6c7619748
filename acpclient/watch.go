package acpclient

import (
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	acp "github.com/coder/acp-go-sdk"
)

// maxWatchedTools bounds the tool calls the watch keeps as running: an
// agent that opens calls and never closes them must not grow the runner
// (past the bound, it simply counts as busy, which only delays a stall).
const maxWatchedTools = 1024

// maxLoopKeyBytes bounds the part of a tool call's input the loop check
// compares; two inputs equal over this many bytes count as the same.
const maxLoopKeyBytes = 4096

// Activity is what the stall watchdog needs of a connection: when the
// agent last spoke ACP (either way), whether a tool call or terminal is
// still running, and whether the agent repeats one tool call.
type Activity struct {
	Last         time.Time // the last ACP message, sent or received
	LastWhat     string    // what that message was (method or update kind)
	RunningTools int       // tool calls reported pending or in progress
	Terminals    int       // terminal commands that have not exited
	ToolCalls    int       // tool calls seen in the session
	Asking       int       // permission requests waiting for a person
}

// Busy reports whether something is running that may legitimately keep
// the agent silent.
func (a Activity) Busy() bool { return a.RunningTools > 0 || a.Terminals > 0 || a.Asking > 0 }

// Loop is the evidence of a tool call repeated with the same input.
type Loop struct {
	Title   string
	Kind    string
	Input   string // excerpt
	Repeats int
}

func (l Loop) String() string {
	return fmt.Sprintf("tool call %q (kind %s, input %s) repeated %d times in a row", l.Title, l.Kind, l.Input, l.Repeats)
}

// watch tracks a connection's activity for the stall watchdog.
type watch struct {
	last atomic.Int64 // unix nanoseconds

	mu       sync.Mutex
	lastWhat string
	running  map[acp.ToolCallId]bool
	calls    int
	key      string // the last tool call's title, kind and input
	repeats  int
	loop     *Loop
	loopAt   int // repeats that count as a loop; 0 means never
	cost     *acp.Cost
}

func newWatch() *watch {
	w := &watch{running: map[acp.ToolCallId]bool{}}
	w.touch("start")
	return w
}

func (w *watch) touch(what string) {
	w.last.Store(time.Now().UnixNano())
	if what != "" {
		w.mu.Lock()
		w.lastWhat = what
		w.mu.Unlock()
	}
}

func runningStatus(s acp.ToolCallStatus) bool {
	return s == "" || s == acp.ToolCallStatusPending || s == acp.ToolCallStatusInProgress
}

// update folds one session/update into the watch.
func (w *watch) update(u acp.SessionUpdate) {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case u.ToolCall != nil:
		tc := u.ToolCall
		w.lastWhat = "tool_call"
		w.calls++
		w.setRunning(tc.ToolCallId, runningStatus(tc.Status))
		w.repeat(tc.Title, string(tc.Kind), tc.RawInput)
	case u.ToolCallUpdate != nil:
		w.lastWhat = "tool_call_update"
		if s := u.ToolCallUpdate.Status; s != nil {
			w.setRunning(u.ToolCallUpdate.ToolCallId, runningStatus(*s))
		}
	case u.AgentMessageChunk != nil:
		w.lastWhat = "agent_message_chunk"
	case u.AgentThoughtChunk != nil:
		w.lastWhat = "agent_thought_chunk"
	case u.Plan != nil:
		w.lastWhat = "plan"
	case u.UsageUpdate != nil:
		w.lastWhat = "usage_update"
		if c := u.UsageUpdate.Cost; c != nil {
			cc := *c
			w.cost = &cc
		}
	default:
		w.lastWhat = "session/update"
	}
}

func (w *watch) setRunning(id acp.ToolCallId, running bool) {
	switch {
	case !running:
		delete(w.running, id)
	case len(w.running) < maxWatchedTools:
		w.running[id] = true
	}
}

// repeat counts tool calls with the same title, kind and input in a row.
func (w *watch) repeat(title, kind string, input any) {
	in := ""
	if input != nil {
		b, err := json.Marshal(input)
		if err == nil {
			in = string(b[:min(len(b), maxLoopKeyBytes)])
		}
	}
	key := kind + "\x00" + title + "\x00" + in
	if key == w.key {
		w.repeats++
	} else {
		w.key, w.repeats = key, 1
	}
	if w.loopAt > 0 && w.repeats >= w.loopAt && w.loop == nil {
		if in == "" {
			in = "(none)"
		}
		w.loop = &Loop{Title: excerpt(title), Kind: excerpt(kind), Input: excerpt(in), Repeats: w.repeats}
	}
}

// SetLoopLimit makes the same tool call with the same input repeated n
// times in a row count as a loop (Client.Loop); 0 turns the check off.
func (c *Client) SetLoopLimit(n int) {
	c.watch.mu.Lock()
	c.watch.loopAt = n
	c.watch.mu.Unlock()
}

// Loop returns the evidence of a tool-call loop, once one was seen.
func (c *Client) Loop() (Loop, bool) {
	c.watch.mu.Lock()
	defer c.watch.mu.Unlock()
	if c.watch.loop == nil {
		return Loop{}, false
	}
	return *c.watch.loop, true
}

// Activity reports the connection's activity for the stall watchdog.
func (c *Client) Activity() Activity {
	w := c.watch
	w.mu.Lock()
	a := Activity{Last: time.Unix(0, w.last.Load()), LastWhat: w.lastWhat, RunningTools: len(w.running), ToolCalls: w.calls}
	w.mu.Unlock()
	a.Terminals = c.terms.running()
	a.Asking = int(c.asking.Load())
	return a
}

// Cost is the session's cumulative cost as the agent last reported it
// (usage_update), when it did. The agent's word: unchecked here.
func (c *Client) Cost() (acp.Cost, bool) {
	c.watch.mu.Lock()
	defer c.watch.mu.Unlock()
	if c.watch.cost == nil {
		return acp.Cost{}, false
	}
	return *c.watch.cost, true
}
