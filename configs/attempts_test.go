package configs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestAttemptsKeysAndVariants(t *testing.T) {
	dir := t.TempDir()
	user := filepath.Join(dir, "config.yaml")
	body := `swarm:
  attempts: 3
  attempts_stop: first-verified
  score_command: "make score"
agent:
  variants:
    - name: sonnet
      env: {anthropic_model: claude-sonnet-4-5}
    - name: codex
      command: codex-acp
`
	if err := os.WriteFile(user, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Load(LoadOptions{UserConfigPath: user, LookupEnv: env()})
	if err != nil {
		t.Fatal(err)
	}
	if c.Swarm.Attempts != 3 || c.Swarm.AttemptsStop != "first-verified" || c.Swarm.ScoreCommand != "make score" {
		t.Errorf("swarm %+v", c.Swarm)
	}
	v := c.Agent.Variants
	if len(v) != 2 || v[0].Name != "sonnet" || v[0].Env["ANTHROPIC_MODEL"] != "claude-sonnet-4-5" || v[1].Command != "codex-acp" {
		t.Errorf("variants %+v", v)
	}
	d, err := Load(LoadOptions{UserConfigPath: "-", LookupEnv: env()})
	if err != nil || d.Swarm.Attempts != 1 || d.Swarm.AttemptsStop != "all" || d.Agent.Variants != nil {
		t.Errorf("defaults: %+v %+v %v", d.Swarm, d.Agent.Variants, err)
	}
}

func TestBadAttemptsKeysNameTheKeyAndTheFix(t *testing.T) {
	dir := t.TempDir()
	user := filepath.Join(dir, "config.yaml")
	for body, want := range map[string]string{
		"swarm:\n  attempts: 17\n":                                       "swarm.attempts",
		"swarm:\n  attempts_stop: first\n":                               "swarm.attempts_stop",
		"agent:\n  variants: {name: x}\n":                                "agent.variants: is not a list",
		"agent:\n  variants: [{name: a}, {name: a}]\n":                   "given twice",
		"agent:\n  variants: [{name: 'a b'}]\n":                          "is not a name",
		"agent:\n  variants: [{name: a, model: x}]\n":                    `unknown key "model"`,
		"agent:\n  variants: [{name: a, env: {ANTHROPIC_API_KEY: x}}]\n": "model key",
		"agent:\n  variants: [{name: a, env: {'1X': x}}]\n":              "must match",
	} {
		if err := os.WriteFile(user, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := Load(LoadOptions{UserConfigPath: user, LookupEnv: env()})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", body, err, want)
		}
	}
}
