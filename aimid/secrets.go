package aimid

import (
	"log/slog"

	"github.com/aimi-tools/swarm/configs"
	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/internal/redact"
)

// knownSecrets is the redactor of what the daemon knows to be secret: the
// values of agent.env (model keys among them), the token publish.token_env
// names, and the model key placeholders. It warns of values too short to
// be redacted (by name: never a value).
func knownSecrets(cfg *configs.Config, getenv func(string) string, log *slog.Logger) *redact.Redactor {
	values := make(map[string]string, len(cfg.Agent.Env)+1)
	for k, v := range cfg.Agent.Env {
		values[k] = v
	}
	if name := cfg.Publish.TokenEnv; name != "" {
		if v := getenv(name); v != "" {
			values[name] = v
		}
	}
	r := redact.New(values, redact.Pattern{Name: contract.GatewayPlaceholderName, Re: contract.GatewayPlaceholderRe})
	for _, name := range r.Short() {
		log.Warn("a secret's value is too short to be kept out of notices, the inbox and journals", "name", name, "minLength", redact.MinLen)
	}
	return r
}
