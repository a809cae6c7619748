package configs

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

// env is an injected environment for Load.
func env(kv ...string) func(string) (string, bool) {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestDefaultsMatchTheDocumentedFile(t *testing.T) {
	c, err := Load(LoadOptions{UserConfigPath: "-", LookupEnv: env()})
	if err != nil {
		t.Fatal(err)
	}
	const gib = 1 << 30
	checks := []struct {
		name      string
		got, want any
	}{
		{"sandbox.image", c.Sandbox.Image, "aimi-sandbox:latest"},
		{"sandbox.cpus", c.Sandbox.CPUs, 2.0},
		{"sandbox.memory", c.Sandbox.MemoryBytes, int64(4 * gib)},
		{"sandbox.swap", c.Sandbox.MemorySwapBytes, int64(8 * gib)},
		{"sandbox.disk", c.Sandbox.DiskBytes, int64(0)},
		{"sandbox.pids", c.Sandbox.Pids, int64(512)},
		{"sandbox.runtime", c.Sandbox.Runtime, ""},
		{"sandbox.require_runtime", c.Sandbox.RequireRuntime, false},
		{"sandbox.read_only_root", c.Sandbox.ReadOnlyRoot, false},
		{"swarm.max_containers", c.Swarm.MaxContainers, 4},
		{"swarm.timeout", c.Swarm.Timeout, 2 * time.Hour},
		{"swarm.stop_grace", c.Swarm.StopGrace, 30 * time.Second},
		{"agent.kind", c.Agent.Kind, "demo"},
		{"agent.permission_policy", c.Agent.PermissionPolicy, "allow"},
		{"agent.handshake_timeout", c.Agent.HandshakeTimeout, 2 * time.Minute},
		{"agent.stall_timeout", c.Agent.StallTimeout, 15 * time.Minute},
		{"agent.loop_limit", c.Agent.LoopLimit, 8},
		{"agent.limit_retries", c.Agent.LimitRetries, 5},
		{"agent.env", len(c.Agent.Env), 0},
		{"task.env_vars", len(c.Task.EnvVars), 0},
		{"git.mode", c.Git.Mode, "auto"},
		{"git.address", c.Git.Address, ""},
		{"git.max_push", c.Git.MaxPush, int64(100 << 20)},
		{"git.max_mirror", c.Git.MaxMirror, int64(gib)},
		{"git.max_workspace", c.Git.MaxWorkspace, int64(gib)},
		{"engine.backend", c.Engine.Backend, "docker"},
		{"engine.host", c.Engine.Host, ""},
		{"publish.github_api", c.Publish.GitHubAPI, "https://api.github.com"},
		{"publish.token_env", c.Publish.TokenEnv, "GITHUB_TOKEN"},
	}
	for _, ch := range checks {
		if ch.got != ch.want {
			t.Errorf("%s = %v, want %v", ch.name, ch.got, ch.want)
		}
	}
}

func TestEveryScalarKeyIsDocumentedInTheDefaultFile(t *testing.T) {
	text := string(DefaultYAML)
	for _, k := range scalarKeys {
		leaf := k.name[strings.LastIndex(k.name, ".")+1:]
		// The line before the key must be a comment: every key documented.
		lines := strings.Split(text, "\n")
		found := false
		for i, l := range lines {
			if strings.HasPrefix(strings.TrimSpace(l), leaf+":") && i > 0 && strings.HasPrefix(strings.TrimSpace(lines[i-1]), "#") {
				found = true
			}
		}
		if !found {
			t.Errorf("%s has no comment line above it in aimi.yaml", k.name)
		}
	}
}

func TestPrecedenceFlagsOverEnvOverUserOverRepoOverDefault(t *testing.T) {
	dir := t.TempDir()
	repo := filepath.Join(dir, "repo")
	user := filepath.Join(dir, "xdg", "aimi", "config.yaml")
	writeFile(t, filepath.Join(repo, ".aimi", "config.yaml"),
		"sandbox:\n  image: repo-img\n  cpus: 3\n  memory: 1g\n  pids: 100\nswarm:\n  max_containers: 7\n")
	writeFile(t, user, "sandbox:\n  cpus: 5\n  memory: 2g\n  pids: 200\n")
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	AddFlags(fs)
	if err := fs.Parse([]string{"--sandbox-pids=300"}); err != nil {
		t.Fatal(err)
	}
	c, err := Load(LoadOptions{
		RepoPath:  repo,
		Flags:     fs,
		LookupEnv: env("XDG_CONFIG_HOME", filepath.Join(dir, "xdg"), "AIMI_SANDBOX_MEMORY", "3g", "AIMI_SANDBOX_PIDS", "250"),
	})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		got, want any
	}{
		{"default wins when nobody sets the key (timeout)", c.Swarm.Timeout, 2 * time.Hour},
		{"repo file wins over default (image)", c.Sandbox.Image, "repo-img"},
		{"repo file wins over default (max_containers)", c.Swarm.MaxContainers, 7},
		{"user file wins over repo file (cpus)", c.Sandbox.CPUs, 5.0},
		{"env wins over user file (memory)", c.Sandbox.MemoryBytes, int64(3 << 30)},
		{"flag wins over env (pids)", c.Sandbox.Pids, int64(300)},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s: got %v, want %v", tt.name, tt.got, tt.want)
		}
	}
}

func TestShellToolEnvNamesKeepTheirMeaning(t *testing.T) {
	c, err := Load(LoadOptions{UserConfigPath: "-", LookupEnv: env(
		"AIMI_SANDBOX_CPUS", "1.5",
		"AIMI_SANDBOX_MEMORY", "512m",
		"AIMI_SANDBOX_SWAP", "1g",
		"AIMI_SANDBOX_DISK", "20g",
	)})
	if err != nil {
		t.Fatal(err)
	}
	if c.Sandbox.CPUs != 1.5 || c.Sandbox.MemoryBytes != 512<<20 || c.Sandbox.MemorySwapBytes != 1<<30 || c.Sandbox.DiskBytes != 20<<30 {
		t.Fatalf("sandbox = %+v", c.Sandbox)
	}
	for _, k := range []string{"sandbox.cpus", "sandbox.memory", "sandbox.swap", "sandbox.disk"} {
		want := "AIMI_" + strings.ToUpper(strings.ReplaceAll(k, ".", "_"))
		if EnvName(k) != want {
			t.Errorf("EnvName(%s) = %s", k, EnvName(k))
		}
	}
}

func TestEveryInvalidValueIsRejectedNamingTheKeyAndTheFix(t *testing.T) {
	tests := []struct {
		name    string
		envKey  string // env var set to val, or "" to use file
		file    string // repo config content
		val     string
		wantKey string
		wantFix string
	}{
		{"memory without a unit suffix that exists", "AIMI_SANDBOX_MEMORY", "", "4x", "sandbox.memory", "use a number with k, m or g, e.g. 4g"},
		{"swap not a size", "AIMI_SANDBOX_SWAP", "", "lots", "sandbox.swap", "e.g. 4g"},
		{"swap smaller than memory", "AIMI_SANDBOX_SWAP", "", "1g", "sandbox.swap", "at least the memory value"},
		{"disk not a size", "AIMI_SANDBOX_DISK", "", "big", "sandbox.disk", "e.g. 4g"},
		{"cpus not a number", "AIMI_SANDBOX_CPUS", "", "two", "sandbox.cpus", "positive number"},
		{"cpus zero", "AIMI_SANDBOX_CPUS", "", "0", "sandbox.cpus", "positive number"},
		{"pids too small", "AIMI_SANDBOX_PIDS", "", "3", "sandbox.pids", "whole number from 16"},
		{"image empty", "AIMI_SANDBOX_IMAGE", "", " ", "sandbox.image", "aimi-sandbox:latest"},
		{"runtime bad name", "AIMI_SANDBOX_RUNTIME", "", "sys box", "sandbox.runtime", "sysbox-runc"},
		{"require_runtime not boolean", "AIMI_SANDBOX_REQUIRE_RUNTIME", "", "maybe", "sandbox.require_runtime", "true or false"},
		{"require_runtime without runtime", "AIMI_SANDBOX_REQUIRE_RUNTIME", "", "true", "sandbox.require_runtime", "set sandbox.runtime"},
		{"read_only_root not boolean", "AIMI_SANDBOX_READ_ONLY_ROOT", "", "yes please", "sandbox.read_only_root", "true or false"},
		{"max_containers zero", "AIMI_SWARM_MAX_CONTAINERS", "", "0", "swarm.max_containers", "from 1 to 256"},
		{"max_containers not a number", "AIMI_SWARM_MAX_CONTAINERS", "", "four", "swarm.max_containers", "from 1 to 256"},
		{"timeout without unit", "AIMI_SWARM_TIMEOUT", "", "7200", "swarm.timeout", "e.g. 30s or 2h"},
		{"stop_grace negative", "AIMI_SWARM_STOP_GRACE", "", "-5s", "swarm.stop_grace", "e.g. 30s or 2h"},
		{"agent kind unknown", "AIMI_AGENT_KIND", "", "gpt", "agent.kind", "one of demo, acp, exec"},
		{"acp agent without command", "AIMI_AGENT_KIND", "", "acp", "agent.command", "set the agent's command line"},
		{"permission policy unknown", "AIMI_AGENT_PERMISSION_POLICY", "", "sometimes", "agent.permission_policy", "allow-kinds:read,edit"},
		{"git mode unknown", "AIMI_GIT_MODE", "", "ftp", "git.mode", "one of auto, local, remote"},
		{"git address not an IP", "AIMI_GIT_ADDRESS", "", "my-host", "git.address", "IP address of this machine"},
		{"git max_push not a size", "AIMI_GIT_MAX_PUSH", "", "huge", "git.max_push", "e.g. 4g"},
		{"git max_push zero", "AIMI_GIT_MAX_PUSH", "", "0", "git.max_push", "e.g. 4g"},
		{"git max_mirror smaller than max_push", "AIMI_GIT_MAX_MIRROR", "", "10m", "git.max_mirror", "raise git.max_mirror or lower git.max_push"},
		{"git max_workspace past what a runner unpacks", "AIMI_GIT_MAX_WORKSPACE", "", "2g", "git.max_workspace", "use 1g or less"},
		{"engine backend unknown", "AIMI_ENGINE_BACKEND", "", "kubernetes", "engine.backend", "one of docker, swarm"},
		{"engine host not an endpoint", "AIMI_ENGINE_HOST", "", "manager:2376", "engine.host", "tcp://host:2376"},
		{"swarm backend with local git needs an address", "AIMI_ENGINE_BACKEND", "", "swarm", "git.address", "or set git.mode: remote"},
		{"github api not a URL", "AIMI_PUBLISH_GITHUB_API", "", "api.github.com", "publish.github_api", "https://api.github.com"},
		{"token_env not a name", "AIMI_PUBLISH_TOKEN_ENV", "", "ghp_secret value", "publish.token_env", "GITHUB_TOKEN"},
		{"pprof without metrics.listen", "AIMI_METRICS_PPROF", "", "true", "metrics.pprof", "set metrics.listen"},
		{"pprof not boolean", "AIMI_METRICS_PPROF", "", "on", "metrics.pprof", "true or false"},
		{"task env key invalid", "", "task:\n  env_vars:\n    1BAD: x\n", "", "task.env_vars", "not starting with a digit"},
		{"agent env value not a string", "", "agent:\n  env:\n    K: [1, 2]\n", "", "agent.env", "quote it"},
		{"unknown key in a file", "", "sandbox:\n  imgae: x\n", "", "sandbox.imgae", "known keys are listed"},
		{"file not YAML", "", "sandbox: [\n", "", "config.yaml", "not valid YAML"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			repo := t.TempDir()
			if tt.file != "" {
				writeFile(t, filepath.Join(repo, ".aimi", "config.yaml"), tt.file)
			}
			e := env()
			if tt.envKey != "" {
				e = env(tt.envKey, tt.val)
			}
			_, err := Load(LoadOptions{RepoPath: repo, UserConfigPath: "-", LookupEnv: e})
			if err == nil {
				t.Fatal("Load accepted the bad value")
			}
			msg := err.Error()
			if !strings.Contains(msg, tt.wantKey) || !strings.Contains(msg, tt.wantFix) {
				t.Fatalf("error %q does not name key %q and fix %q", msg, tt.wantKey, tt.wantFix)
			}
			if tt.envKey != "" && EnvName(tt.wantKey) == tt.envKey && !strings.Contains(msg, "from "+tt.envKey) {
				t.Errorf("error %q does not say it came from %s", msg, tt.envKey)
			}
		})
	}
}

func TestInvalidValueErrorSaysWhichFileItCameFrom(t *testing.T) {
	repo := t.TempDir()
	p := filepath.Join(repo, ".aimi", "config.yaml")
	writeFile(t, p, "sandbox:\n  memory: 4x\n")
	_, err := Load(LoadOptions{RepoPath: repo, UserConfigPath: "-", LookupEnv: env()})
	want := `sandbox.memory: "4x" is not a size (from ` + p + `); use a number with k, m or g, e.g. 4g`
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("error = %v, want it to contain %q", err, want)
	}
}

func TestAllProblemsAreReportedAtOnce(t *testing.T) {
	_, err := Load(LoadOptions{UserConfigPath: "-", LookupEnv: env("AIMI_SANDBOX_MEMORY", "x", "AIMI_SWARM_TIMEOUT", "y")})
	if err == nil || !strings.Contains(err.Error(), "sandbox.memory") || !strings.Contains(err.Error(), "swarm.timeout") {
		t.Fatalf("error = %v, want both keys", err)
	}
}

func TestAgentEnvExpandsDaemonVariablesAndNeverPrintsThem(t *testing.T) {
	repo := t.TempDir()
	writeFile(t, filepath.Join(repo, ".aimi", "config.yaml"),
		"agent:\n  env:\n    ANTHROPIC_API_KEY: ${ANTHROPIC_API_KEY}\n    MISSING_KEY: ${NOT_SET_ANYWHERE}\ntask:\n  env_vars:\n    node_env: development\n")
	const secret = "sk-ant-very-secret"
	c, err := Load(LoadOptions{RepoPath: repo, UserConfigPath: "-", LookupEnv: env("ANTHROPIC_API_KEY", secret)})
	if err != nil {
		t.Fatal(err)
	}
	if c.Agent.Env["ANTHROPIC_API_KEY"] != secret {
		t.Fatalf("agent.env not expanded: %v", c.Agent.Env)
	}
	if _, ok := c.Agent.Env["MISSING_KEY"]; ok {
		t.Error("a value naming an unset variable was kept")
	}
	if len(c.Warnings) != 1 || !strings.Contains(c.Warnings[0], "NOT_SET_ANYWHERE") {
		t.Errorf("warnings = %q", c.Warnings)
	}
	if c.Task.EnvVars["NODE_ENV"] != "development" {
		t.Errorf("task.env_vars keys not upper-cased: %v", c.Task.EnvVars)
	}
	var logBuf strings.Builder
	slog.New(slog.NewTextHandler(&logBuf, nil)).Info("config", "cfg", c, "env", c.Agent.Env)
	js, _ := json.Marshal(c)
	for _, out := range []string{fmt.Sprint(c), fmt.Sprintf("%+v", c), fmt.Sprintf("%#v", c.Agent.Env), logBuf.String(), string(js)} {
		if strings.Contains(out, secret) {
			t.Fatalf("secret printed: %s", out)
		}
	}
}

// TestRepoConfigIsReadOnlyAsARegularFileInTheRepository: a FIFO, a link to
// /dev/zero or a link out of the repository as .aimi/config.yaml is
// refused at once, naming the file.
func TestRepoConfigIsReadOnlyAsARegularFileInTheRepository(t *testing.T) {
	outside := filepath.Join(t.TempDir(), "c.yaml")
	writeFile(t, outside, "sandbox:\n  image: elsewhere\n")
	for name, create := range map[string]func(p string) error{
		"FIFO":            func(p string) error { return syscall.Mkfifo(p, 0o644) },
		"link /dev/zero":  func(p string) error { return os.Symlink("/dev/zero", p) },
		"link outside":    func(p string) error { return os.Symlink(outside, p) },
		"directory there": func(p string) error { return os.Mkdir(p, 0o755) },
	} {
		t.Run(name, func(t *testing.T) {
			repo := t.TempDir()
			os.MkdirAll(filepath.Join(repo, ".aimi"), 0o755)
			if err := create(filepath.Join(repo, RepoConfigPath)); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() {
				_, err := Load(LoadOptions{RepoPath: repo, UserConfigPath: "-", LookupEnv: env()})
				done <- err
			}()
			select {
			case err := <-done:
				if err == nil || !strings.Contains(err.Error(), RepoConfigPath) {
					t.Fatalf("Load = %v, want a refusal naming %s", err, RepoConfigPath)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("Load did not return within 10s")
			}
		})
	}
}

func TestModelsConfig(t *testing.T) {
	dir := t.TempDir()
	user := filepath.Join(dir, "config.yaml")
	write := func(y string) (*Config, error) {
		os.WriteFile(user, []byte(y), 0o644)
		return Load(LoadOptions{UserConfigPath: user, LookupEnv: func(string) (string, bool) { return "", false }})
	}
	c, err := write("models:\n  anthropic:\n    url: http://127.0.0.1:9/x/\n  mistral:\n    url: https://api.mistral.ai/v1\n    keys: {MISTRAL_API_KEY: bearer}\n    base_url_env: [MISTRAL_BASE_URL]\n")
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Models["anthropic"].URL.String(); got != "http://127.0.0.1:9/x" {
		t.Errorf("anthropic url %s", got)
	}
	if m := c.Models["mistral"]; m.Keys["MISTRAL_API_KEY"] != "bearer" || len(m.BaseURLEnv) != 1 || c.Models["openai"].URL.String() != "https://api.openai.com/v1" {
		t.Errorf("models %+v", c.Models)
	}
	for y, want := range map[string]string{
		"models:\n  openai:\n    url: ftp://x\n":                                 "models.openai.url",
		"models:\n  openai:\n    url: \"https://h/?key=1\"\n":                    "models.openai.url",
		"models:\n  x:\n    url: https://h\n":                                    "models.x",
		"agent:\n  env:\n    OPENAI_API_KEY: k\n    OPENAI_BASE_URL: http://h\n": "OPENAI_BASE_URL",
	} {
		_, err := write(y)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want an error naming %s", y, err, want)
		}
	}
	os.WriteFile(user, nil, 0o644)
	_, err = Load(LoadOptions{UserConfigPath: user, LookupEnv: func(k string) (string, bool) {
		return map[string]string{"AIMI_MODELS_GEMINI_URL": "not a url"}[k], k == "AIMI_MODELS_GEMINI_URL"
	}})
	if err == nil || !strings.Contains(err.Error(), "models.gemini.url") {
		t.Errorf("bad env url: %v", err)
	}
}
