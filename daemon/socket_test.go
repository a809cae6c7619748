package daemon_test

import (
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aimi-tools/swarm/daemon"
	"github.com/aimi-tools/swarm/daemon/daemontest"
)

func slogTo(w io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

func TestListenMakesAPrivateDirectoryAndSocket(t *testing.T) {
	sock := filepath.Join(daemontest.ShortTempDir(t), "a", "b", "aimid.sock")
	ln, err := daemon.Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Release()
	fi, err := os.Stat(sock)
	if err != nil || fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket mode = %v, %v", fi.Mode(), err)
	}
	di, _ := os.Stat(filepath.Dir(sock))
	if di.Mode().Perm() != 0o700 {
		t.Errorf("dir mode = %v", di.Mode())
	}
}

func TestListenTightensADirectoryOfItsOwn(t *testing.T) {
	dir := filepath.Join(daemontest.ShortTempDir(t), "run")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o755)
	ln, err := daemon.Listen(filepath.Join(dir, "aimid.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Release()
	if di, _ := os.Stat(dir); di.Mode().Perm() != 0o700 {
		t.Errorf("socket directory left at %v", di.Mode())
	}
}

func TestListenRefusesASharedDirectoryWithoutChangingIt(t *testing.T) {
	dir := daemontest.ShortTempDir(t)
	os.Chmod(dir, 0o1777)
	if err := os.WriteFile(filepath.Join(dir, "someone-elses.txt"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := daemon.Listen(filepath.Join(dir, "aimid.sock"))
	if err == nil || !strings.Contains(err.Error(), "open to others (mode 1777)") && !strings.Contains(err.Error(), "open to others (mode 0777)") || !strings.Contains(err.Error(), "directory of its own") {
		t.Fatalf("err = %v", err)
	}
	if di, _ := os.Stat(dir); di.Mode().Perm() != 0o777 {
		t.Errorf("shared directory changed to %v", di.Mode())
	}
	if _, err := os.Stat(filepath.Join(dir, "aimid.sock.lock")); err == nil {
		t.Error("lock file created in a refused directory")
	}
}

func TestListenRefusesADirectoryOfAnotherUser(t *testing.T) {
	dir := "/" // root's, for anyone else
	if os.Geteuid() == 0 {
		dir = daemontest.ShortTempDir(t)
		if err := os.Chown(dir, 65534, 65534); err != nil {
			t.Fatal(err)
		}
	}
	_, err := daemon.Listen(filepath.Join(dir, "aimid-test.sock"))
	if err == nil || !strings.Contains(err.Error(), "belongs to uid") || !strings.Contains(err.Error(), "not to you") {
		t.Fatalf("err = %v", err)
	}
}

func TestListenReplacesAStaleSocket(t *testing.T) {
	sock := filepath.Join(daemontest.ShortTempDir(t), "aimid.sock")
	// A killed daemon leaves its socket file: bind one and drop it without
	// unlinking.
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	l.SetUnlinkOnClose(false)
	l.Close()
	if _, err := os.Stat(sock); err != nil {
		t.Fatal("stale socket not left behind")
	}
	ln, err := daemon.Listen(sock)
	if err != nil {
		t.Fatalf("stale socket not replaced: %v", err)
	}
	ln.Close()
	if _, err := os.Stat(sock); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Close left the socket: %v", err)
	}
	if _, err := daemon.Listen(sock); !errors.Is(err, daemon.ErrAlreadyRunning) {
		t.Errorf("the lock was dropped before Release: %v", err)
	}
	ln.Release()
	ln2, err := daemon.Listen(sock)
	if err != nil {
		t.Fatalf("Listen after Release: %v", err)
	}
	ln2.Release()
}

func TestListenRefusesWhenADaemonIsLive(t *testing.T) {
	t.Run("same lock", func(t *testing.T) {
		sock := filepath.Join(daemontest.ShortTempDir(t), "aimid.sock")
		ln, err := daemon.Listen(sock)
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Release()
		if _, err := daemon.Listen(sock); !errors.Is(err, daemon.ErrAlreadyRunning) {
			t.Fatalf("second Listen: %v", err)
		}
	})
	t.Run("socket answers without the lock", func(t *testing.T) {
		sock := filepath.Join(daemontest.ShortTempDir(t), "aimid.sock")
		l, err := net.Listen("unix", sock) // a daemon that does not take the lock
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		if _, err := daemon.Listen(sock); !errors.Is(err, daemon.ErrAlreadyRunning) {
			t.Fatalf("Listen over a live socket: %v", err)
		}
	})
}

func TestListenRefusesToReplaceANonSocket(t *testing.T) {
	sock := filepath.Join(daemontest.ShortTempDir(t), "aimid.sock")
	os.WriteFile(sock, []byte("precious"), 0o600)
	if _, err := daemon.Listen(sock); err == nil {
		t.Fatal("Listen replaced a regular file")
	}
	if b, _ := os.ReadFile(sock); string(b) != "precious" {
		t.Fatal("file changed")
	}
}
