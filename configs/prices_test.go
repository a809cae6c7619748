package configs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aimi-tools/swarm/usage"
)

func TestModelPrices(t *testing.T) {
	load := func(yaml string) (*Config, error) {
		p := filepath.Join(t.TempDir(), "config.yaml")
		if err := os.WriteFile(p, []byte(yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		return Load(LoadOptions{UserConfigPath: p, LookupEnv: func(string) (string, bool) { return "", false }})
	}
	c, err := load("models:\n  anthropic:\n    prices: {input: 1, cache_write: 2.5}\n")
	if err != nil {
		t.Fatal(err)
	}
	want := usage.DefaultPrices()["anthropic"]
	want.Input, want.CacheWrite = 1, 2.5
	if c.Prices["anthropic"] != want || c.Prices["openai"] != usage.DefaultPrices()["openai"] {
		t.Fatalf("prices %+v", c.Prices)
	}
	for _, bad := range []string{"prices: {input: -1}", "prices: {input: cheap}", "prices: {tip: 1}", "prices: 3"} {
		if _, err := load("models:\n  anthropic:\n    " + bad + "\n"); err == nil || !strings.Contains(err.Error(), "models.anthropic.prices") {
			t.Errorf("%s: %v", bad, err)
		}
	}
}
