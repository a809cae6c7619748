package daemon_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/daemon"
	"github.com/aimi-tools/swarm/daemon/daemontest"
)

// envHealthAs turns the test binary into a client that calls Health on the
// socket it names and prints the error.
const envHealthAs = "DAEMON_TEST_HEALTH_SOCKET"

func TestMain(m *testing.M) {
	if sock := os.Getenv(envHealthAs); sock != "" {
		_, err := daemon.NewClient(sock).Health(context.Background())
		fmt.Printf("permission=%v unreachable=%v\n%v\n", errors.Is(err, daemon.ErrSocketPermission), errors.Is(err, daemon.ErrUnreachable), err)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// healthAsOtherUser calls Health on sock as another user: as nobody when the
// test runs as root (root passes every permission check), else as this user
// with the socket's mode taken away.
func healthAsOtherUser(t *testing.T, sock string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		if err := os.Chmod(sock, 0); err != nil {
			t.Fatal(err)
		}
		_, err := daemon.NewClient(sock).Health(context.Background())
		return fmt.Sprintf("permission=%v unreachable=%v\n%v\n", errors.Is(err, daemon.ErrSocketPermission), errors.Is(err, daemon.ErrUnreachable), err)
	}
	// nobody must be able to run the binary: copy it somewhere it can.
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := daemontest.ShortTempDir(t)
	os.Chmod(dir, 0o755)
	bin := filepath.Join(dir, "client")
	data, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), envHealthAs+"="+sock)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("client as nobody: %v\n%s", err, out)
	}
	return string(out)
}

func TestPermissionDeniedOnTheSocketSaysSo(t *testing.T) {
	sock, _ := daemontest.Serve(t, &daemontest.Swarms{})
	out := healthAsOtherUser(t, sock)
	t.Log(out)
	if !strings.HasPrefix(out, "permission=true unreachable=false") {
		t.Fatalf("want a permission error, not unreachable:\n%s", out)
	}
	for _, want := range []string{"permission denied on the aimi daemon socket " + sock, "belongs to uid", "mode ", "--socket"} {
		if !strings.Contains(out, want) {
			t.Errorf("%q lacks %q", out, want)
		}
	}
	if strings.Contains(out, "no aimi daemon running") {
		t.Errorf("a running daemon reported as not running: %s", out)
	}
	if os.Geteuid() == 0 && !strings.Contains(out, "which you cannot enter") {
		t.Errorf("the private directory in the way is not named: %s", out)
	}
}

func TestPermissionDeniedNamesTheSocketsGroupAndMode(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to connect as another user")
	}
	sock, _ := daemontest.Serve(t, &daemontest.Swarms{})
	for d := filepath.Dir(sock); d != os.TempDir() && d != "/"; d = filepath.Dir(d) {
		os.Chmod(d, 0o755) // nobody may reach the socket, not connect
	}
	out := healthAsOtherUser(t, sock)
	t.Log(out)
	for _, want := range []string{"permission=true", "the socket " + sock + " belongs to uid 0 (root), group gid 0", "Srw-------", "write permission"} {
		if !strings.Contains(out, want) {
			t.Errorf("%q lacks %q", out, want)
		}
	}
}

func TestWrongMethodIs405WithAllow(t *testing.T) {
	_, _, sock := serve(t, &daemontest.Swarms{})
	hc := unixHTTP(sock)
	defer hc.CloseIdleConnections()
	for _, tc := range []struct{ method, path, allow string }{
		{"PUT", "/v1/health", "GET, HEAD"},
		{"GET", "/v1/swarms/start", "POST"},
		{"DELETE", "/v1/swarms", "GET, HEAD"},
	} {
		req, _ := http.NewRequest(tc.method, "http://aimid"+tc.path, nil)
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != tc.allow || !strings.Contains(string(body), api.CodeMethodNotAllowed) {
			t.Errorf("%s %s: %d Allow=%q %s", tc.method, tc.path, resp.StatusCode, resp.Header.Get("Allow"), body)
		}
	}
	if status, body := rawCall(t, sock, "PUT", "/v1/nothing", ""); status != 404 || body.Code != api.CodeNotFound {
		t.Errorf("unknown path: %d %+v", status, body)
	}
}
