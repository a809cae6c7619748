package acpclient

import (
	"fmt"
	"slices"
	"strings"

	acp "github.com/coder/acp-go-sdk"
)

// Policy decides how session/request_permission is answered. The runner has
// no human to ask, so the answer is configuration (AIMI_PERMISSION_POLICY).
type Policy struct {
	mode  policyMode
	kinds []acp.ToolKind // for allowKinds: tool kinds that are allowed
}

type policyMode int

const (
	allowAll policyMode = iota
	rejectAll
	allowKinds
)

// ParsePolicy reads "allow", "reject" or "allow-kinds:read,edit,execute".
// The empty string means allow: the sandbox container is the safety boundary.
func ParsePolicy(s string) (Policy, error) {
	s = strings.TrimSpace(s)
	switch {
	case s == "" || s == "allow":
		return Policy{mode: allowAll}, nil
	case s == "reject":
		return Policy{mode: rejectAll}, nil
	case strings.HasPrefix(s, "allow-kinds:"):
		var kinds []acp.ToolKind
		for _, k := range strings.Split(strings.TrimPrefix(s, "allow-kinds:"), ",") {
			k = strings.TrimSpace(k)
			if k == "" {
				continue
			}
			if !knownKind(acp.ToolKind(k)) {
				return Policy{}, fmt.Errorf("permission policy %q: unknown tool kind %q (use read, edit, delete, move, search, execute, think, fetch, switch_mode, other)", s, k)
			}
			kinds = append(kinds, acp.ToolKind(k))
		}
		return Policy{mode: allowKinds, kinds: kinds}, nil
	default:
		return Policy{}, fmt.Errorf("permission policy %q: use allow, reject or allow-kinds:<kind>,<kind>", s)
	}
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
	case allowKinds:
		ks := make([]string, len(p.kinds))
		for i, k := range p.kinds {
			ks[i] = string(k)
		}
		return "allow-kinds:" + strings.Join(ks, ",")
	}
	return "allow"
}

// allows reports whether a tool call of this kind is allowed. A call without a
// kind counts as "other".
func (p Policy) allows(kind *acp.ToolKind) bool {
	switch p.mode {
	case allowAll:
		return true
	case rejectAll:
		return false
	}
	k := acp.ToolKindOther
	if kind != nil && *kind != "" {
		k = *kind
	}
	return slices.Contains(p.kinds, k)
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
