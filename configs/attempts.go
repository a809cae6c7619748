package configs

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/aimi-tools/swarm/attempts"
	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/gateway"
)

// VariantsKey is the list of agent variants attempts go round
// (docs/attempts.md); it comes from files only.
const VariantsKey = "agent.variants"

// maxVariants bounds agent.variants: more than attempts.Max could never
// all run.
const maxVariants = attempts.Max

// Variant is one entry of agent.variants: what an attempt running it
// changes of the agent. Empty fields change nothing.
type Variant struct {
	// Name is what AIMI_VARIANT says and status shows.
	Name string
	// Command replaces agent.command.
	Command string
	// Env adds to (and overrides) agent.env; not for model keys, which
	// stay in agent.env (the model gateway holds them).
	Env map[string]string
}

var variantNameRE = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,63}$`)

// attempts reads swarm.attempts, swarm.attempts_stop, swarm.score_command
// and agent.variants.
func (r *reader) attempts(c *Config) {
	c.Swarm.Attempts = int(r.integer("swarm.attempts", attempts.Min, attempts.Max))
	c.Swarm.AttemptsStop = r.oneOf("swarm.attempts_stop", attempts.StopAll, attempts.StopFirstVerified)
	c.Swarm.ScoreCommand = r.str("swarm.score_command")
	c.Agent.Variants = r.variants(c.Models)
}

// variants reads agent.variants: a list of {name, command, env}.
func (r *reader) variants(models map[string]gateway.Provider) []Variant {
	raw := r.v.Get(VariantsKey)
	if raw == nil {
		return nil
	}
	where := origin(r.sources, VariantsKey)
	list, ok := raw.([]any)
	if !ok {
		if s, isStr := raw.(string); isStr && strings.TrimSpace(s) == "" {
			return nil
		}
		r.probs = append(r.probs, fmt.Sprintf("%s: is not a list (from %s); write a YAML list of {name, command, env}", VariantsKey, where))
		return nil
	}
	if len(list) > maxVariants {
		r.probs = append(r.probs, fmt.Sprintf("%s: %d entries, more than %d (from %s); an attempt runs one each, and a task file has at most %d attempts", VariantsKey, len(list), maxVariants, where, attempts.Max))
		return nil
	}
	var out []Variant
	for i, e := range list {
		v, err := variantOf(e, models)
		if err == nil && slices.ContainsFunc(out, func(o Variant) bool { return o.Name == v.Name }) {
			err = fmt.Errorf("name %q is given twice; give each variant its own name", v.Name)
		}
		if err != nil {
			r.probs = append(r.probs, fmt.Sprintf("%s[%d]: %v (from %s)", VariantsKey, i, err, where))
			continue
		}
		out = append(out, v)
	}
	return out
}

// variantOf reads one entry of agent.variants.
func variantOf(e any, models map[string]gateway.Provider) (Variant, error) {
	m, ok := e.(map[string]any)
	if !ok {
		return Variant{}, fmt.Errorf("is not a map; write {name: NAME, command: CMD, env: {VAR: value}}")
	}
	var v Variant
	for k, val := range m {
		switch strings.ToLower(k) {
		case "name":
			v.Name = strings.TrimSpace(fmt.Sprint(val))
		case "command":
			v.Command = strings.TrimSpace(fmt.Sprint(val))
		case "env":
			env, err := variantEnv(val, models)
			if err != nil {
				return Variant{}, err
			}
			v.Env = env
		default:
			return Variant{}, fmt.Errorf("unknown key %q; a variant has name, command and env", k)
		}
	}
	if !variantNameRE.MatchString(v.Name) {
		return Variant{}, fmt.Errorf("name %q is not a name; use letters, digits, '.', '_' and '-' (at most 64)", v.Name)
	}
	return v, nil
}

// variantEnv reads a variant's env: upper-case names, no model key.
func variantEnv(val any, models map[string]gateway.Provider) (map[string]string, error) {
	m, ok := val.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("env is not a map; write env: {VAR: value}")
	}
	keys := map[string]bool{}
	for _, p := range models {
		for k := range p.Keys {
			keys[k] = true
		}
	}
	out := make(map[string]string, len(m))
	for k, x := range m {
		name := strings.ToUpper(k)
		switch {
		case !contract.ValidEnvKey(name):
			return nil, fmt.Errorf("env name %q must match %s", k, contract.PatternEnvKey)
		case keys[name]:
			return nil, fmt.Errorf("env %s is a model key; keys stay in agent.env (the model gateway holds them), a variant chooses the model with other variables", name)
		}
		out[name] = fmt.Sprint(x)
	}
	return out, nil
}

// Clone is a deep copy of v.
func (v Variant) Clone() Variant {
	v.Env = maps.Clone(v.Env)
	return v
}

// sameVariant reports whether two variants are the same.
func sameVariant(a, b Variant) bool {
	return a.Name == b.Name && a.Command == b.Command && maps.Equal(a.Env, b.Env)
}
