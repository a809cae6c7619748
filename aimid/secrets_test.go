package aimid

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/aimi-tools/swarm/configs"
	"github.com/aimi-tools/swarm/contract"
)

// TestKnownSecretsAreAgentEnvThePublishTokenAndPlaceholders: each shows as
// its marker; a value too short is named (never shown) in a warning.
func TestKnownSecretsAreAgentEnvThePublishTokenAndPlaceholders(t *testing.T) {
	t.Parallel()
	cfg := &configs.Config{}
	cfg.Agent.Env = configs.Secrets{"ANTHROPIC_API_KEY": "sk-ant-abcdef123456", "PIN": "zq9"}
	cfg.Publish.TokenEnv = "GITHUB_TOKEN"
	env := map[string]string{"GITHUB_TOKEN": "ghp_0123456789abcdef"}
	var logs bytes.Buffer
	r := knownSecrets(cfg, func(k string) string { return env[k] }, slog.New(slog.NewTextHandler(&logs, nil)))
	in := "a SK-ANT-ABCDEF123456 b ghp_0123456789abcdef c " + contract.GatewayPlaceholderPrefix + "00112233445566778899aabb d zq9"
	want := "a [secret:ANTHROPIC_API_KEY] b [secret:GITHUB_TOKEN] c [secret:model-key-placeholder] d zq9"
	if got := r.String(in); got != want {
		t.Errorf("redacted:\n got %q\nwant %q", got, want)
	}
	if !strings.Contains(logs.String(), "name=PIN") || strings.Contains(logs.String(), "zq9") {
		t.Errorf("warning: %s", logs.String())
	}
}
