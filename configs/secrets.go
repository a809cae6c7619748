package configs

import (
	"log/slog"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/internal/redact"
)

// Secrets is a map of environment values that must never be printed: every
// formatting path (fmt, slog, JSON) shows the keys only.
type Secrets map[string]string

// String lists the keys with redacted values.
func (s Secrets) String() string {
	keys := make([]string, 0, len(s))
	for k := range s {
		keys = append(keys, k+"=<redacted>")
	}
	sort.Strings(keys)
	return "[" + strings.Join(keys, " ") + "]"
}

// GoString redacts for %#v too.
func (s Secrets) GoString() string { return s.String() }

// LogValue redacts for slog.
func (s Secrets) LogValue() slog.Value { return slog.StringValue(s.String()) }

// MarshalJSON redacts for JSON.
func (s Secrets) MarshalJSON() ([]byte, error) { return []byte(strconv.Quote(s.String())), nil }

// PlaceholderSecretName is what a model key placeholder of the gateway's
// shows as in redacted text: [secret:model-key-placeholder].
const PlaceholderSecretName = "model-key-placeholder"

// placeholderRe finds the gateway's placeholders (the prefix and the hex
// of their random bytes), whoever's they are.
var placeholderRe = regexp.MustCompile(`(?i)` + regexp.QuoteMeta(contract.GatewayPlaceholderPrefix) + `[0-9a-f]{16,}`)

// KnownSecrets is the redactor of what cfg makes secret: the values of
// agent.env (model keys among them), the token publish.token_env names
// (read with getenv), and the model key placeholders by their shape. The
// daemon applies it to agent text it passes on; `aimi mcp` to everything
// it answers an agent with.
func KnownSecrets(cfg *Config, getenv func(string) string) *redact.Redactor {
	values := make(map[string]string, len(cfg.Agent.Env)+1)
	for k, v := range cfg.Agent.Env {
		values[k] = v
	}
	if name := cfg.Publish.TokenEnv; name != "" {
		if v := getenv(name); v != "" {
			values[name] = v
		}
	}
	return redact.New(values, redact.Pattern{Name: PlaceholderSecretName, Re: placeholderRe})
}
