package aimid

import (
	"log/slog"

	"github.com/aimi-tools/swarm/configs"
	"github.com/aimi-tools/swarm/internal/redact"
)

// knownSecrets is the redactor of what the daemon knows to be secret
// (configs.KnownSecrets). It warns of values too short to be redacted (by
// name: never a value).
func knownSecrets(cfg *configs.Config, getenv func(string) string, log *slog.Logger) *redact.Redactor {
	r := configs.KnownSecrets(cfg, getenv)
	for _, name := range r.Short() {
		log.Warn("a secret's value is too short to be kept out of notices, the inbox and journals", "name", name, "minLength", redact.MinLen)
	}
	return r
}
