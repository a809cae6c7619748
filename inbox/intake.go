package inbox

import (
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"time"
	"unicode/utf8"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/contract"
)

// Bounds of one request's fields (bytes, counts).
const (
	maxTitle   = 512
	maxPath    = 1024
	maxPaths   = 16
	maxCommand = 2048
	maxOptions = 8
	maxOptText = 128
	maxStory   = 64
)

var runnerIDRE = regexp.MustCompile(`^[0-9a-f]{8,32}$`)

// knownOptionKinds are ACP's permission option kinds.
var knownOptionKinds = map[string]bool{"allow_once": true, "allow_always": true, "reject_once": true, "reject_always": true}

// ParseAsk reads and checks one AskRequest of at most contract.AskMaxBody
// bytes. Text fields are cut to their bounds (at a rune boundary); what
// cannot be shown or answered (no options, unknown option kinds, a bad
// id) is an error.
func ParseAsk(r io.Reader) (contract.AskRequest, error) {
	var req contract.AskRequest
	b, err := io.ReadAll(io.LimitReader(r, contract.AskMaxBody+1))
	if err != nil {
		return req, fmt.Errorf("read the request: %w", err)
	}
	if len(b) > contract.AskMaxBody {
		return req, fmt.Errorf("the request is larger than %d bytes", contract.AskMaxBody)
	}
	if err := json.Unmarshal(b, &req); err != nil {
		return req, fmt.Errorf("the request is not an ask request: %w", err)
	}
	if !runnerIDRE.MatchString(req.ID) {
		return req, fmt.Errorf("id %q: want 8 to 32 lower-case hex digits", cut(req.ID, 40))
	}
	q := &req.Question
	if n := len(q.Options); n == 0 || n > maxOptions {
		return req, fmt.Errorf("the request offers %d options: want 1 to %d", n, maxOptions)
	}
	seen := map[string]bool{}
	for i := range q.Options {
		o := &q.Options[i]
		if o.ID == "" || len(o.ID) > maxOptText || !utf8.ValidString(o.ID) || seen[o.ID] {
			return req, fmt.Errorf("option %d: its id is empty, longer than %d bytes, not UTF-8 or repeated", i+1, maxOptText)
		}
		if !knownOptionKinds[o.Kind] {
			return req, fmt.Errorf("option %q: kind %q is not allow_once, allow_always, reject_once or reject_always", cut(o.ID, 40), cut(o.Kind, 40))
		}
		seen[o.ID] = true
		o.Name = cut(o.Name, maxOptText)
	}
	req.StoryID = cut(req.StoryID, maxStory)
	q.Title, q.Kind, q.Command = cut(q.Title, maxTitle), cut(q.Kind, maxOptText), cut(q.Command, maxCommand)
	q.ToolCallID = cut(q.ToolCallID, maxOptText)
	if len(q.Paths) > maxPaths {
		q.Paths = q.Paths[:maxPaths]
	}
	for i, p := range q.Paths {
		q.Paths[i] = cut(p, maxPath)
	}
	return req, nil
}

// cut bounds s to n bytes at a rune boundary; invalid UTF-8 becomes U+FFFD.
func cut(s string, n int) string {
	if !utf8.ValidString(s) {
		s = string([]rune(s))
	}
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// request builds the pending request of an AskRequest from a caller, its
// text redacted. It is dated at its arrival (now), whatever the AskedAt
// the agent sent: a date in the past would let every request expire at
// once and free its place for the next one.
func (in *Inbox) request(from caller, a contract.AskRequest, now time.Time) api.PermissionRequest {
	red := in.cfg.Redact.String
	q := a.Question
	opts := make([]api.PermissionOption, len(q.Options))
	for i, o := range q.Options {
		opts[i] = api.PermissionOption{ID: o.ID, Name: red(o.Name), Kind: o.Kind}
	}
	paths := make([]string, len(q.Paths))
	for i, p := range q.Paths {
		paths[i] = red(p)
	}
	if len(paths) == 0 {
		paths = nil
	}
	return api.PermissionRequest{
		ID: RequestID(contract.Sandbox{Swarm: from.SwarmID, Container: from.Container}, a.ID), RepoPath: from.RepoPath, SwarmID: from.SwarmID,
		ContainerName: from.Container, StoryID: red(a.StoryID), Title: red(q.Title), Kind: red(q.Kind), Paths: paths,
		Command: red(q.Command), Options: opts, AskedAt: now.UTC(), Deadline: now.Add(in.cfg.Timeout).UTC(),
	}
}

// secretOption reports whether an option's id holds a secret: the id goes
// back to the runner as the answer, so it cannot be redacted, and the
// request is refused instead.
func (in *Inbox) secretOption(a contract.AskRequest) bool {
	for _, o := range a.Question.Options {
		if in.cfg.Redact.String(o.ID) != o.ID {
			return true
		}
	}
	return false
}
