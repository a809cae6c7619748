package acpclient

import (
	"fmt"
	"slices"
	"strings"

	acp "github.com/coder/acp-go-sdk"
)

// Policy decides how session/request_permission is answered: by
// configuration (AIMI_PERMISSION_POLICY), or, for "ask" and "ask-kinds:",
// by a person through the Client's Asker.
type Policy struct {
	mode  policyMode
	kinds []acp.ToolKind // for allowKinds: tool kinds that are allowed
}

type policyMode int

const (
	allowAll policyMode = iota
	rejectAll
	allowKinds
	askAll
	askKinds // kinds are asked, the rest allowed
)

// ParsePolicy reads "allow", "reject", "allow-kinds:read,edit,execute",
// "ask" or "ask-kinds:execute,delete". The empty string means allow: the
// sandbox container is the safety boundary.
func ParsePolicy(s string) (Policy, error) {
	s = strings.TrimSpace(s)
	switch {
	case s == "" || s == "allow":
		return Policy{mode: allowAll}, nil
	case s == "reject":
		return Policy{mode: rejectAll}, nil
	case s == "ask":
		return Policy{mode: askAll}, nil
	case strings.HasPrefix(s, "allow-kinds:"):
		kinds, err := parseKinds(s, "allow-kinds:")
		return Policy{mode: allowKinds, kinds: kinds}, err
	case strings.HasPrefix(s, "ask-kinds:"):
		kinds, err := parseKinds(s, "ask-kinds:")
		return Policy{mode: askKinds, kinds: kinds}, err
	default:
		return Policy{}, fmt.Errorf("permission policy %q: use allow, reject, allow-kinds:<kind>,<kind>, ask or ask-kinds:<kind>,<kind>", s)
	}
}

func parseKinds(s, prefix string) ([]acp.ToolKind, error) {
	var kinds []acp.ToolKind
	for _, k := range strings.Split(strings.TrimPrefix(s, prefix), ",") {
		k = strings.TrimSpace(k)
		if k == "" {
			continue
		}
		if !knownKind(acp.ToolKind(k)) {
			return nil, fmt.Errorf("permission policy %q: unknown tool kind %q (use read, edit, delete, move, search, execute, think, fetch, switch_mode, other)", s, k)
		}
		kinds = append(kinds, acp.ToolKind(k))
	}
	return kinds, nil
}

func knownKind(k acp.ToolKind) bool {
	switch k {
	case acp.ToolKindRead, acp.ToolKindEdit, acp.ToolKindDelete, acp.ToolKindMove,
		acp.ToolKindSearch, acp.ToolKindExecute, acp.ToolKindThink, acp.ToolKindFetch,
		acp.ToolKindSwitchMode, acp.ToolKindOther:
		return true
	}
	return false
}

// String gives the policy back in its configuration form.
func (p Policy) String() string {
	switch p.mode {
	case rejectAll:
		return "reject"
	case askAll:
		return "ask"
	case allowKinds, askKinds:
		ks := make([]string, len(p.kinds))
		for i, k := range p.kinds {
			ks[i] = string(k)
		}
		return map[policyMode]string{allowKinds: "allow-kinds:", askKinds: "ask-kinds:"}[p.mode] + strings.Join(ks, ",")
	}
	return "allow"
}

// Asks reports whether the policy asks a person about tool calls of this
// kind (a call without a kind counts as "other").
func (p Policy) Asks(kind *acp.ToolKind) bool {
	switch p.mode {
	case askAll:
		return true
	case askKinds:
		return slices.Contains(p.kinds, kindOf(kind))
	}
	return false
}

// AsksAnyone reports whether the policy asks a person about some calls.
func (p Policy) AsksAnyone() bool { return p.mode == askAll || p.mode == askKinds }

func kindOf(kind *acp.ToolKind) acp.ToolKind {
	if kind != nil && *kind != "" {
		return *kind
	}
	return acp.ToolKindOther
}

// allows reports whether a tool call of this kind is allowed. A call without a
// kind counts as "other".
func (p Policy) allows(kind *acp.ToolKind) bool {
	switch p.mode {
	case allowAll, askKinds: // askKinds allows what it does not ask
		return true
	case rejectAll, askAll:
		return false
	}
	return slices.Contains(p.kinds, kindOf(kind))
}

// choose picks the option that carries the decision: a one-time answer is
// preferred over an "always" one so that a later policy change is not undone
// by an agent that remembers. ok is false when no option matches (then the
// request is answered cancelled, the only outcome every agent understands).
func choose(options []acp.PermissionOption, allow bool) (acp.PermissionOptionId, bool) {
	prefs := []acp.PermissionOptionKind{acp.PermissionOptionKindRejectOnce, acp.PermissionOptionKindRejectAlways}
	if allow {
		prefs = []acp.PermissionOptionKind{acp.PermissionOptionKindAllowOnce, acp.PermissionOptionKindAllowAlways}
	}
	for _, want := range prefs {
		for _, o := range options {
			if o.Kind == want {
				return o.OptionId, true
			}
		}
	}
	return "", false
}
