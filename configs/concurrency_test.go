package configs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestModelsMaxConcurrent(t *testing.T) {
	user := filepath.Join(t.TempDir(), "config.yaml")
	write := func(y string) (*Config, error) {
		os.WriteFile(user, []byte(y), 0o644)
		return Load(LoadOptions{UserConfigPath: user, LookupEnv: func(string) (string, bool) { return "", false }})
	}
	c, err := write("models:\n  anthropic:\n    max_concurrent: 4\n  mistral:\n    url: https://api.mistral.ai/v1\n    keys: {MISTRAL_API_KEY: bearer}\n    max_concurrent: 2\n")
	if err != nil {
		t.Fatal(err)
	}
	if a, m := c.Models["anthropic"], c.Models["mistral"]; a.MaxConcurrent != 4 || m.MaxConcurrent != 2 || c.Models["openai"].MaxConcurrent != 0 {
		t.Errorf("max_concurrent: anthropic %d mistral %d openai %d, want 4 2 0", a.MaxConcurrent, m.MaxConcurrent, c.Models["openai"].MaxConcurrent)
	}
	if a := c.Models["anthropic"]; a.URL == nil || a.URL.String() != "https://api.anthropic.com" {
		t.Errorf("anthropic url with only max_concurrent set: %v", a.URL)
	}
	for _, y := range []string{"models:\n  openai:\n    max_concurrent: -1\n", "models:\n  openai:\n    max_concurrent: lots\n"} {
		if _, err := write(y); err == nil || !strings.Contains(err.Error(), "models.openai.max_concurrent") {
			t.Errorf("%q: %v, want an error naming models.openai.max_concurrent", y, err)
		}
	}
}

func TestRequestsPerMinuteAndLimitMaxWait(t *testing.T) {
	user := filepath.Join(t.TempDir(), "config.yaml")
	write := func(y string) (*Config, error) {
		os.WriteFile(user, []byte(y), 0o644)
		return Load(LoadOptions{UserConfigPath: user, LookupEnv: func(string) (string, bool) { return "", false }})
	}
	c, err := write("agent:\n  limit_max_wait: 90m\nmodels:\n  anthropic:\n    requests_per_minute: 50\n")
	if err != nil {
		t.Fatal(err)
	}
	if c.Models["anthropic"].RequestsPerMinute != 50 || c.Models["openai"].RequestsPerMinute != 0 || c.Agent.LimitMaxWait.String() != "1h30m0s" {
		t.Errorf("requests_per_minute %d, limit_max_wait %s", c.Models["anthropic"].RequestsPerMinute, c.Agent.LimitMaxWait)
	}
	if c, err = write(""); err != nil || c.Agent.LimitMaxWait.String() != "6h0m0s" {
		t.Errorf("default limit_max_wait %v %v, want 6h", c, err)
	}
	for y, key := range map[string]string{
		"models:\n  openai:\n    requests_per_minute: -1\n":    "models.openai.requests_per_minute",
		"models:\n  openai:\n    requests_per_minute: often\n": "models.openai.requests_per_minute",
		"agent:\n  limit_max_wait: -1h\n":                      "agent.limit_max_wait",
		"agent:\n  limit_max_wait: whenever\n":                 "agent.limit_max_wait",
		"agent:\n  limit_max_wait: 2562047h\n":                 "agent.limit_max_wait",
	} {
		if _, err := write(y); err == nil || !strings.Contains(err.Error(), key) {
			t.Errorf("%q: %v, want an error naming %s", y, err, key)
		}
	}
}
