package configs

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestMalformedEgressAllowStopsNamingTheKey(t *testing.T) {
	dir := t.TempDir()
	user := filepath.Join(dir, "config.yaml")
	for _, body := range []string{"egress:\n  allow: [\"exa*mple.com\"]\n", "egress:\n  allow: [\"get example.com\"]\n", "egress:\n  allow: [1]\n", "egress:\n  allow:\n    x: y\n"} {
		if err := os.WriteFile(user, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := Load(LoadOptions{UserConfigPath: user, LookupEnv: env()})
		if err == nil || !strings.Contains(err.Error(), "egress.allow") || !strings.Contains(err.Error(), user) {
			t.Errorf("%q: %v", body, err)
		}
	}
}

func TestEgressAllowParsesAndTheRepositoryAdds(t *testing.T) {
	dir := t.TempDir()
	user := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(user, []byte("egress:\n  allow:\n    - registry.npmjs.org\n    - \"GET,HEAD example.com/dl/\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Load(LoadOptions{UserConfigPath: user, LookupEnv: env()})
	if err != nil || len(c.Egress.Allow) != 2 || c.Egress.Allow[1].String() != "GET,HEAD example.com/dl/" {
		t.Fatalf("%+v %v", c, err)
	}
	repo := t.TempDir()
	if err := os.MkdirAll(filepath.Join(repo, ".aimi"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(repo, RepoConfigPath), []byte("egress:\n  allow: [\"*.pythonhosted.org\"]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	rules, err := RepoEgressAllow(repo)
	if err != nil || len(rules) != 1 || rules[0].String() != "*.pythonhosted.org" {
		t.Fatalf("%v %v", rules, err)
	}
}

// A repository's egress.ask is read on its own: absent, true, false, or a
// bad value named with its key.
func TestRepoEgressAsk(t *testing.T) {
	for body, want := range map[string]string{"": "nil", "egress:\n  ask: true\n": "true", "egress:\n  ask: false\n": "false", "egress:\n  ask: maybe\n": "error"} {
		repo := t.TempDir()
		if body != "" {
			if err := os.MkdirAll(filepath.Join(repo, ".aimi"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(repo, RepoConfigPath), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		ask, err := RepoEgressAsk(repo)
		got := "nil"
		switch {
		case err != nil:
			got = "error"
			if !strings.Contains(err.Error(), EgressAskKey) {
				t.Errorf("%q: error %v does not name %s", body, err, EgressAskKey)
			}
		case ask != nil:
			got = strconv.FormatBool(*ask)
		}
		if got != want {
			t.Errorf("%q: %s, want %s", body, got, want)
		}
	}
}
