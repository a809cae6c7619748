package acpclient

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	acp "github.com/coder/acp-go-sdk"
)

// maxMessageBytes bounds the agent text kept per session: the summary uses at
// most a paragraph of it, and a chatty agent must not grow the runner.
const maxMessageBytes = 16 * 1024

// Tool calls, files and permission answers are the agent's to multiply: the
// transcript keeps the first maxTranscriptEntries of each, titles cut to
// maxTitleBytes, and counts the rest.
const (
	maxTranscriptEntries = 256
	maxTitleBytes        = 200
)

// Transcript folds a session's updates into what a summary needs: the agent's
// message text, its tool calls with kinds and statuses, the latest plan, the
// files touched through fs/*, the permission answers.
type Transcript struct {
	mu          sync.Mutex
	message     strings.Builder
	messageCut  bool
	thoughts    int
	toolOrder   []acp.ToolCallId
	tools       map[acp.ToolCallId]*ToolCall
	plan        []acp.PlanEntry
	files       []string
	fileSet     map[string]bool
	permissions []string
	omitted     struct{ tools, files, permissions int }
	other       map[string]int // update kinds the summary does not use, by name
}

// ToolCall is the last known state of one tool call.
type ToolCall struct {
	ID     string
	Title  string
	Kind   string
	Status string
}

func newTranscript() *Transcript {
	return &Transcript{tools: map[acp.ToolCallId]*ToolCall{}, fileSet: map[string]bool{}, other: map[string]int{}}
}

func (t *Transcript) apply(u acp.SessionUpdate) {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case u.AgentMessageChunk != nil:
		t.addText(u.AgentMessageChunk.Content)
	case u.AgentThoughtChunk != nil:
		t.thoughts++
	case u.ToolCall != nil:
		tc := u.ToolCall
		t.tool(tc.ToolCallId, &ToolCall{Title: tc.Title, Kind: string(tc.Kind), Status: string(tc.Status)})
	case u.ToolCallUpdate != nil:
		tu := u.ToolCallUpdate
		upd := &ToolCall{}
		if tu.Title != nil {
			upd.Title = *tu.Title
		}
		if tu.Kind != nil {
			upd.Kind = string(*tu.Kind)
		}
		if tu.Status != nil {
			upd.Status = string(*tu.Status)
		}
		t.tool(tu.ToolCallId, upd)
	case u.Plan != nil:
		t.plan = slices.Clone(u.Plan.Entries)
	case u.UserMessageChunk != nil:
		t.other["user_message_chunk"]++
	case u.AvailableCommandsUpdate != nil:
		t.other["available_commands_update"]++
	case u.CurrentModeUpdate != nil:
		t.other["current_mode_update"]++
	case u.ConfigOptionUpdate != nil:
		t.other["config_option_update"]++
	case u.SessionInfoUpdate != nil:
		t.other["session_info_update"]++
	case u.UsageUpdate != nil:
		t.other["usage_update"]++
	default:
		// A kind newer than this SDK: counted, never fatal.
		t.other["unknown"]++
	}
}

func (t *Transcript) addText(b acp.ContentBlock) {
	var s string
	switch {
	case b.Text != nil:
		s = b.Text.Text
	case b.ResourceLink != nil:
		s = " [" + b.ResourceLink.Name + "]"
	default:
		return
	}
	if t.messageCut {
		return
	}
	if t.message.Len()+len(s) > maxMessageBytes {
		s = s[:max(0, maxMessageBytes-t.message.Len())]
		for len(s) > 0 && !utf8.ValidString(s) {
			s = s[:len(s)-1]
		}
		t.messageCut = true
	}
	t.message.WriteString(s)
}

// tool merges an update into the tool call; empty fields keep the old value.
func (t *Transcript) tool(id acp.ToolCallId, upd *ToolCall) {
	cur, ok := t.tools[id]
	if !ok {
		if len(t.toolOrder) >= maxTranscriptEntries {
			t.omitted.tools++
			return
		}
		cur = &ToolCall{ID: cutBytes(string(id), maxTitleBytes)}
		t.tools[id] = cur
		t.toolOrder = append(t.toolOrder, id)
	}
	if upd.Title != "" {
		cur.Title = cutBytes(upd.Title, maxTitleBytes)
	}
	if upd.Kind != "" {
		cur.Kind = cutBytes(upd.Kind, maxTitleBytes)
	}
	if upd.Status != "" {
		cur.Status = cutBytes(upd.Status, maxTitleBytes)
	}
}

func (t *Transcript) noteFile(verb, rel string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := verb + " " + rel
	switch {
	case t.fileSet[e]:
	case len(t.files) >= maxTranscriptEntries:
		t.omitted.files++
	default:
		t.fileSet[e] = true
		t.files = append(t.files, e)
	}
}

func (t *Transcript) notePermission(title, verdict string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if title == "" {
		title = "a tool call"
	}
	if len(t.permissions) >= maxTranscriptEntries {
		t.omitted.permissions++
		return
	}
	t.permissions = append(t.permissions, fmt.Sprintf("%s: %s", cutBytes(title, maxTitleBytes), verdict))
}

// Message is the agent's streamed message text so far.
func (t *Transcript) Message() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.message.String()
}

// ToolCalls returns the tool calls in the order they started.
func (t *Transcript) ToolCalls() []ToolCall {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]ToolCall, 0, len(t.toolOrder))
	for _, id := range t.toolOrder {
		out = append(out, *t.tools[id])
	}
	return out
}

// Permissions lists the permission requests and how they were answered.
func (t *Transcript) Permissions() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.permissions)
}

// Summary is one paragraph: what the agent said (its last sentences), the tool
// calls with kind and status, the plan's progress, the files touched and the
// permission answers. The caller cuts it to the message limit.
func (t *Transcript) Summary() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var parts []string
	if msg := strings.Join(strings.Fields(t.message.String()), " "); msg != "" {
		// The end of the message is where agents state what they did.
		if r := []rune(msg); len(r) > 900 {
			msg = "…" + string(r[len(r)-900:])
		}
		parts = append(parts, "Agent: "+msg)
	}
	if len(t.toolOrder) > 0 {
		calls := make([]string, 0, len(t.toolOrder))
		for _, id := range t.toolOrder {
			tc := t.tools[id]
			kind, status := tc.Kind, tc.Status
			if kind == "" {
				kind = "other"
			}
			if status == "" {
				status = "pending"
			}
			calls = append(calls, fmt.Sprintf("%s (%s, %s)", tc.Title, kind, status))
		}
		if t.omitted.tools > 0 {
			calls = append(calls, fmt.Sprintf("%d more", t.omitted.tools))
		}
		parts = append(parts, fmt.Sprintf("Tool calls: %s.", strings.Join(calls, "; ")))
	}
	if len(t.plan) > 0 {
		done := 0
		for _, e := range t.plan {
			if e.Status == acp.PlanEntryStatusCompleted {
				done++
			}
		}
		parts = append(parts, fmt.Sprintf("Plan: %d of %d entries completed.", done, len(t.plan)))
	}
	if len(t.files) > 0 {
		files := t.files
		if t.omitted.files > 0 {
			files = append(slices.Clip(files), fmt.Sprintf("%d more", t.omitted.files))
		}
		parts = append(parts, "Actions: "+strings.Join(files, ", ")+".")
	}
	if len(t.permissions) > 0 {
		perms := t.permissions
		if t.omitted.permissions > 0 {
			perms = append(slices.Clip(perms), fmt.Sprintf("%d more", t.omitted.permissions))
		}
		parts = append(parts, "Permissions: "+strings.Join(perms, "; ")+".")
	}
	if len(parts) == 0 {
		return "The agent reported nothing."
	}
	return strings.Join(parts, " ")
}

// cutBytes cuts s to at most n bytes on a character boundary.
func cutBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + "…"
}
