package mcpserver

import (
	"strings"

	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/internal/redact"
)

// secretNameParts mark an environment variable as a credential by its
// name: model keys (ANTHROPIC_API_KEY), tokens (GITHUB_TOKEN), passwords.
var secretNameParts = []string{"KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "AUTH"}

// KnownSecrets is the redactor of what `aimi mcp` keeps out of its
// answers: the gateway's placeholders by their shape, and the values of
// its environment's credentials by their names. The daemon takes
// agent.env and the publish token from its environment by name, which is
// usually the same shell's; `aimi mcp` cannot read the daemon's config
// itself (package configs links the engine's packages, which the command
// line must not: cmd/aimi TestLinksNoEngineCode).
func KnownSecrets(environ []string) *redact.Redactor {
	values := map[string]string{}
	for _, kv := range environ {
		name, value, ok := strings.Cut(kv, "=")
		if !ok || value == "" {
			continue
		}
		upper := strings.ToUpper(name)
		for _, part := range secretNameParts {
			if strings.Contains(upper, part) {
				values[name] = value
				break
			}
		}
	}
	return redact.New(values, redact.Pattern{Name: contract.GatewayPlaceholderName, Re: contract.GatewayPlaceholderRe})
}
