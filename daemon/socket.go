package daemon

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/aimi-tools/swarm/internal/filelock"
	"golang.org/x/sys/unix"
)

// ErrAlreadyRunning: another daemon answers on the socket.
var ErrAlreadyRunning = errors.New("another aimid is already running on this socket")

// staleDialTimeout bounds the probe of an existing socket file: a live daemon
// accepts at once; a dead one refuses at once. The timeout only covers a
// daemon too busy to accept, which still counts as live.
const staleDialTimeout = 2 * time.Second

// Listener is the daemon's socket. Close removes the socket file; the
// one-daemon lock is held until Release, so that a successor cannot start
// (and recover the containers) while this daemon still flushes its state.
type Listener struct {
	net.Listener
	path     string
	unlock   func() error // drops the one-daemon lock
	once     sync.Once
	closeErr error
	release  sync.Once
}

// Path is the socket's file path.
func (l *Listener) Path() string { return l.path }

// Close stops listening and removes the socket. It is idempotent:
// http.Server.Shutdown closes the listener too.
func (l *Listener) Close() error {
	l.once.Do(func() {
		l.closeErr = l.Listener.Close()
		// net's unix listener unlinks the file on Close; make sure anyway.
		if err := os.Remove(l.path); err != nil && !errors.Is(err, fs.ErrNotExist) && l.closeErr == nil {
			l.closeErr = err
		}
	})
	return l.closeErr
}

// Release closes the listener if needed and drops the lock: the daemon's
// last step.
func (l *Listener) Release() {
	l.Close()
	l.release.Do(func() { _ = l.unlock() })
}

// Listen opens the daemon's unix socket at path. Its directory must be
// private (see privateDir), and the socket is chmod-ed 0600 right after
// bind; in a private directory nobody else can reach it in between. A lock file next to the socket (<path>.lock, flock; it stays
// after exit, since removing a flock file races with a daemon starting)
// makes two daemons starting at once safe; a leftover socket file from a
// killed daemon (connect refused) is removed and replaced, a live one is
// ErrAlreadyRunning.
func Listen(path string) (*Listener, error) {
	if path == "" {
		return nil, errors.New("listen: empty socket path")
	}
	if err := privateDir(filepath.Dir(path)); err != nil {
		return nil, err
	}
	unlock, err := filelock.TryLock(path+".lock", 0o600)
	if errors.Is(err, filelock.ErrHeld) {
		return nil, fmt.Errorf("%w (%s); stop it first or use another --socket", ErrAlreadyRunning, path)
	}
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*Listener, error) { _ = unlock(); return nil, err }
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode()&fs.ModeSocket == 0 {
			return fail(fmt.Errorf("%s exists and is not a socket; remove it or use another --socket", path))
		}
		if c, err := net.DialTimeout("unix", path, staleDialTimeout); err == nil {
			c.Close()
			return fail(fmt.Errorf("%w (%s); stop it first or use another --socket", ErrAlreadyRunning, path))
		}
		if err := os.Remove(path); err != nil {
			return fail(fmt.Errorf("remove stale socket %s: %w", path, err))
		}
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return fail(fmt.Errorf("listen on %s: %w", path, err))
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return fail(fmt.Errorf("chmod socket %s: %w", path, err))
	}
	return &Listener{Listener: ln, path: path, unlock: unlock}, nil
}

// privateDir makes sure the socket's directory is the daemon's alone, so
// that nobody else can replace the socket or hold its lock. A missing one is
// created 0700. An existing one must belong to us; when it is open to others
// it is tightened to 0700 if it holds nothing but daemon sockets and their
// locks (a directory of the socket's own), and refused otherwise: a shared
// directory such as /tmp or /run is not the daemon's to change.
func privateDir(dir string) error {
	fi, err := os.Stat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return fmt.Errorf("create socket directory %s: %w (pass --socket with a writable path)", dir, err)
		}
		if err := os.Chmod(dir, 0o700); err != nil { // MkdirAll's mode passes through the umask
			return fmt.Errorf("make socket directory %s private: %w", dir, err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("socket directory %s: %w", dir, err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("socket directory %s is not a directory; pass --socket with a path in a directory", dir)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("socket directory %s belongs to %s, not to you (%s), and its owner could replace the socket: pass --socket with a path in a directory of your own (aimid creates a missing one with mode 0700)",
			dir, describeUser(st.Uid), describeUser(uint32(os.Geteuid())))
	}
	if fi.Mode().Perm()&0o077 == 0 {
		return nil
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("socket directory %s: %w", dir, err)
	}
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".sock") && !strings.HasSuffix(e.Name(), ".sock.lock") {
			return fmt.Errorf("socket directory %s is open to others (mode %04o) and holds other files (%s), so aimid will not change it: pass --socket with a path in a directory of its own (aimid creates a missing one with mode 0700), or chmod 700 %s",
				dir, fi.Mode().Perm(), e.Name(), dir)
		}
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return fmt.Errorf("make socket directory %s private (mode %04o now): %w", dir, fi.Mode().Perm(), err)
	}
	return nil
}

// describeUser names a uid for a message: "uid 1000 (alice)".
func describeUser(uid uint32) string {
	id := strconv.FormatUint(uint64(uid), 10)
	if u, err := user.LookupId(id); err == nil {
		return "uid " + id + " (" + u.Username + ")"
	}
	return "uid " + id
}

// describeGroup names a gid for a message: "gid 998 (docker)".
func describeGroup(gid uint32) string {
	id := strconv.FormatUint(uint64(gid), 10)
	if g, err := user.LookupGroupId(id); err == nil {
		return "gid " + id + " (" + g.Name + ")"
	}
	return "gid " + id
}

// ErrSocketPermission: the socket exists but this user may not connect to
// it (or reach it).
var ErrSocketPermission = errors.New("permission denied on the aimi daemon socket")

// SocketPermissionError says who may use the socket instead.
type SocketPermissionError struct {
	Socket string
	Detail string // whose the socket or the directory in the way is
	Err    error
}

func (e *SocketPermissionError) Error() string {
	return fmt.Sprintf("permission denied on the aimi daemon socket %s: %s, and you are %s; run aimi as that user, or give yourself access (a group with write permission on the socket and search permission on its directories), or start a daemon of your own with a socket of your own (--socket or %s)",
		e.Socket, e.Detail, describeUser(uint32(os.Geteuid())), EnvSocket)
}

// Unwrap exposes ErrSocketPermission and the dial error.
func (e *SocketPermissionError) Unwrap() []error { return []error{ErrSocketPermission, e.Err} }

// socketPermission explains an EACCES on dialing socket: the first directory
// on the way that this user cannot search, else the socket's owner, group
// and mode.
func socketPermission(socket string, err error) *SocketPermissionError {
	e := &SocketPermissionError{Socket: socket, Err: err}
	abs, aerr := filepath.Abs(socket)
	if aerr != nil {
		abs = socket
	}
	describe := func(what, p string) string {
		fi, err := os.Stat(p)
		if err != nil {
			return fmt.Sprintf("%s %s cannot be examined (%v)", what, p, err)
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			return fmt.Sprintf("%s %s has mode %v", what, p, fi.Mode())
		}
		return fmt.Sprintf("%s %s belongs to %s, group %s, mode %v", what, p, describeUser(st.Uid), describeGroup(st.Gid), fi.Mode())
	}
	parts := strings.Split(filepath.Dir(abs), string(filepath.Separator))
	for i := 2; i <= len(parts); i++ {
		d := string(filepath.Separator) + filepath.Join(parts[1:i]...)
		if unix.Access(d, unix.X_OK) != nil {
			e.Detail = describe("its directory", d) + ", which you cannot enter"
			return e
		}
	}
	e.Detail = describe("the socket", abs) + " (connecting needs write permission on it)"
	return e
}
