package acpclient

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	acp "github.com/coder/acp-go-sdk"

	"github.com/aimi-tools/swarm/contract"
)

// Question is one permission request put to a person: what the agent
// wants to do and the options it offered. Everything in it comes from the
// agent. The runner sends it to the daemon as it is.
type Question = contract.AskQuestion

// Asker puts a question to a person and waits for the option chosen. It
// returns an error when nobody can be asked (then the request is
// rejected); ctx ends when the turn is cancelled.
type Asker interface {
	Ask(ctx context.Context, q Question) (optionID string, err error)
}

// question builds the Question of a permission request.
func question(p acp.RequestPermissionRequest) Question {
	q := Question{ToolCallID: string(p.ToolCall.ToolCallId), Kind: string(kindOf(p.ToolCall.Kind))}
	if p.ToolCall.Title != nil {
		q.Title = *p.ToolCall.Title
	}
	for _, l := range p.ToolCall.Locations {
		q.Paths = append(q.Paths, l.Path)
	}
	q.Command = commandOf(p.ToolCall.RawInput)
	for _, o := range p.Options {
		q.Options = append(q.Options, contract.AskOption{ID: string(o.OptionId), Name: o.Name, Kind: string(o.Kind)})
	}
	return q
}

// commandOf finds the command line agents put in an execute call's raw
// input ({"command": "..."} in the agents seen so far).
func commandOf(raw any) string {
	m, ok := raw.(map[string]any)
	if !ok {
		if b, err := json.Marshal(raw); err == nil {
			_ = json.Unmarshal(b, &m)
		}
	}
	switch c := m["command"].(type) {
	case string:
		return c
	case []any:
		parts := make([]string, 0, len(c))
		for _, a := range c {
			parts = append(parts, fmt.Sprint(a))
		}
		return strings.Join(parts, " ")
	}
	return ""
}

// ask puts p to the Asker. ok is false when nobody could answer or the
// answer names no option the agent offered: then the request is rejected.
func (c *Client) ask(ctx context.Context, p acp.RequestPermissionRequest) (acp.PermissionOptionId, string, bool) {
	if c.asker == nil {
		return "", "nobody to ask", false
	}
	c.asking.Add(1)
	id, err := c.asker.Ask(ctx, question(p))
	c.asking.Add(-1)
	if err != nil {
		c.log.Warn("permission request not answered by a person; rejected", "err", err)
		return "", "not answered: " + err.Error(), false
	}
	for _, o := range p.Options {
		if string(o.OptionId) == id {
			verdict := "rejected by a person"
			if o.Kind == acp.PermissionOptionKindAllowOnce || o.Kind == acp.PermissionOptionKindAllowAlways {
				verdict = "allowed by a person"
			}
			return o.OptionId, verdict, true
		}
	}
	return "", "answered with an option the agent did not offer", false
}
