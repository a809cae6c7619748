package configs

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aimi-tools/swarm/internal/gittest"

	"github.com/aimi-tools/swarm/api"
)

func TestRepoConfigAppliesPerStartAndFlagsStillWin(t *testing.T) {
	t.Parallel()
	noEnv := func(string) (string, bool) { return "", false }
	base := LoadOptions{UserConfigPath: "-", LookupEnv: noEnv}
	global, err := Load(base)
	if err != nil {
		t.Fatal(err)
	}
	repoWith := func(yaml string, origin bool) string { return repoWithConfig(t, yaml, origin) }
	tests := []struct {
		name      string
		yaml      string
		origin    bool
		git       bool // a git service runs
		req       api.StartRequest
		want      api.StartRequest
		warnKeys  string
		wantField string
	}{
		{"defaults fill image and max", "", true, true, api.StartRequest{},
			api.StartRequest{Image: "aimi-sandbox:latest", Max: 4}, "", ""},
		{"repo image, max and local mode apply", "sandbox:\n  image: repo-img\nswarm:\n  max_containers: 3\ngit:\n  mode: local\n", true, true, api.StartRequest{},
			api.StartRequest{Image: "repo-img", Max: 3, Local: true}, "", ""},
		{"request values (flags) win over the repo file", "sandbox:\n  image: repo-img\nswarm:\n  max_containers: 3\n", true, true, api.StartRequest{Image: "flag-img", Max: 9},
			api.StartRequest{Image: "flag-img", Max: 9}, "", ""},
		{"auto mode without origin is local", "", false, true, api.StartRequest{},
			api.StartRequest{Image: "aimi-sandbox:latest", Max: 4, Local: true}, "", ""},
		{"auto mode without a git service stays remote", "", false, false, api.StartRequest{},
			api.StartRequest{Image: "aimi-sandbox:latest", Max: 4}, "", ""},
		{"daemon-wide keys in the repo file are named in a warning", "sandbox:\n  memory: 1g\nagent:\n  env:\n    K: secret-value\n", true, true, api.StartRequest{},
			api.StartRequest{Image: "aimi-sandbox:latest", Max: 4}, "[agent.env sandbox.memory]", ""},
		{"a bad repo file refuses the start naming the key", "swarm:\n  timeout: forever\n", true, true, api.StartRequest{},
			api.StartRequest{}, "", "config"},
		{"repo attempts and their stop apply, the flag wins", "swarm:\n  attempts: 3\n  attempts_stop: first-verified\n", true, true, api.StartRequest{Attempts: 2},
			api.StartRequest{Image: "aimi-sandbox:latest", Max: 4, Attempts: 2, AttemptsStop: "first-verified"}, "", ""},
		{"the score command and variants are daemon-wide", "swarm:\n  score_command: make score\nagent:\n  variants: [{name: a}]\n", true, true, api.StartRequest{},
			api.StartRequest{Image: "aimi-sandbox:latest", Max: 4, Attempts: 1, AttemptsStop: "all"}, "[agent.variants swarm.score_command]", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			repo := repoWith(tt.yaml, tt.origin)
			var logs bytes.Buffer
			prep := PrepareStart(global, base, tt.git, slog.New(slog.NewTextHandler(&logs, nil)), nil)
			req := tt.req
			req.RepoPath = repo
			err := prep(context.Background(), &req)
			if tt.wantField != "" {
				var fe *api.FieldError
				if !errors.As(err, &fe) || fe.Field != tt.wantField || !strings.Contains(err.Error(), "swarm.timeout") {
					t.Fatalf("err = %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := tt.want
			want.RepoPath = repo
			if req.Image != want.Image || req.Max != want.Max || req.Local != want.Local ||
				(want.Attempts != 0 && (req.Attempts != want.Attempts || req.AttemptsStop != want.AttemptsStop)) {
				t.Errorf("request = %+v, want %+v", req, want)
			}
			if tt.warnKeys != "" && !strings.Contains(logs.String(), tt.warnKeys) {
				t.Errorf("warning does not name %s: %s", tt.warnKeys, logs.String())
			}
			if tt.warnKeys == "" && logs.Len() > 0 {
				t.Errorf("unexpected log: %s", logs.String())
			}
			if strings.Contains(logs.String(), "secret-value") {
				t.Error("a repo agent.env value was logged")
			}
		})
	}
}

// repoWithConfig makes a git checkout, with an origin if asked, and yaml
// as its .aimi/config.yaml unless empty.
func repoWithConfig(t *testing.T, yaml string, origin bool) string {
	repo := t.TempDir()
	if out, err := exec.Command("git", "init", "-q", repo).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v %s", err, out)
	}
	if origin {
		exec.Command("git", "-C", repo, "remote", "add", "origin", gittest.NowhereOrigin).Run()
	}
	if yaml != "" {
		os.MkdirAll(filepath.Join(repo, ".aimi"), 0o755)
		os.WriteFile(filepath.Join(repo, ".aimi", "config.yaml"), []byte(yaml), 0o644)
	}
	return repo
}
