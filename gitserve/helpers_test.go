package gitserve

import (
	"context"
	"crypto/x509"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/aimi-tools/swarm/container"
	"github.com/aimi-tools/swarm/internal/syncbuf"
)

// hermeticEnv keeps the tester's git config out of the tests.
var hermeticEnv = []string{
	"GIT_CONFIG_NOSYSTEM=1",
	"GIT_CONFIG_GLOBAL=" + os.DevNull,
	"GIT_TERMINAL_PROMPT=0",
	"GIT_AUTHOR_NAME=Test", "GIT_AUTHOR_EMAIL=test@example.com",
	"GIT_COMMITTER_NAME=Test", "GIT_COMMITTER_EMAIL=test@example.com",
	"LC_ALL=C",
}

// gitOut runs git and returns its combined output and error.
func gitOut(dir string, env []string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), hermeticEnv...), env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// mustGit runs git and fails the test if it fails.
func mustGit(t testing.TB, dir string, args ...string) string {
	t.Helper()
	out, err := gitOut(dir, nil, args...)
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(out)
}

// newRepo makes a checkout on branch main with one commit.
func newRepo(t testing.TB) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "repo")
	mustGit(t, "", "init", "-q", "-b", "main", dir)
	commitFile(t, dir, "README.md", "hello\n")
	return dir
}

func commitFile(t testing.TB, dir, name, content string) string {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	mustGit(t, dir, "add", name)
	mustGit(t, dir, "commit", "-q", "-m", "add "+name)
	return mustGit(t, dir, "rev-parse", "HEAD")
}

// newServiceWithEngine is newService with the engine probe the daemon
// gives the service, on the Docker engine of the environment.
func newServiceWithEngine(t testing.TB, opts Options) (*Service, *syncbuf.Buffer) {
	t.Helper()
	docker, err := container.NewDocker(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { docker.Close() })
	opts.TipProbe = EngineProbe{Files: docker}
	return newService(t, opts)
}

// newService starts a service with every log line captured at debug level,
// without an engine probe unless opts has one (unit tests judge from
// pushes alone).
func newService(t testing.TB, opts Options) (*Service, *syncbuf.Buffer) {
	t.Helper()
	logs := &syncbuf.Buffer{}
	if opts.DataDir == "" {
		opts.DataDir = filepath.Join(t.TempDir(), "data")
	}
	opts.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	s, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, logs
}

// refs lists every ref of a repository with its value, and the object
// files, so that "nothing changed" can be compared.
func snapshot(t testing.TB, repo string) string {
	t.Helper()
	var b strings.Builder
	b.WriteString(mustGit(t, repo, "for-each-ref", "--format=%(refname) %(objectname)"))
	b.WriteString("\n--objects--\n")
	_ = filepath.WalkDir(filepath.Join(repo, "objects"), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			b.WriteString(strings.TrimPrefix(p, repo) + "\n")
		}
		return nil
	})
	return b.String()
}

// clientEnv is the environment a container gets: the CA to trust and the
// token as an extra header (as the runner sends it).
func clientEnv(caFile, authHeader string) []string {
	env := []string{"GIT_SSL_CAINFO=" + caFile}
	if authHeader != "" {
		env = append(env, "GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=http.extraHeader", "GIT_CONFIG_VALUE_0="+authHeader)
	}
	return env
}

func ctxT(t testing.TB) context.Context { return t.Context() }

func itoa(n int) string { return strconv.Itoa(n) }

// caPool trusts the service CA a grant names (its CAFile), as a
// container's git does.
func caPool(t testing.TB, caFile string) *x509.CertPool {
	t.Helper()
	pem, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		t.Fatalf("no certificate in %s", caFile)
	}
	return pool
}
