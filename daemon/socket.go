package daemon

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

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
	lock     *os.File
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
	l.release.Do(func() { l.lock.Close() }) // closing the descriptor drops the flock
}

// Listen opens the daemon's unix socket at path. A missing directory is
// created 0700 (an existing one is not touched), and the socket is chmod-ed
// 0600 right after bind; in a private directory nobody else can reach it in
// between. A lock file next to the socket (<path>.lock, flock; it stays
// after exit, since removing a flock file races with a daemon starting)
// makes two daemons starting at once safe; a leftover socket file from a
// killed daemon (connect refused) is removed and replaced, a live one is
// ErrAlreadyRunning.
func Listen(path string) (*Listener, error) {
	if path == "" {
		return nil, errors.New("listen: empty socket path")
	}
	dir := filepath.Dir(path)
	// A directory we create is private; an existing one (say --socket
	// /tmp/aimid.sock) is left as it is: the socket's own 0600 guards it.
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("create socket directory %s: %w (pass --socket with a writable path)", dir, err)
		}
		if err := os.Chmod(dir, 0o700); err != nil { // MkdirAll's mode passes through the umask
			return nil, fmt.Errorf("make socket directory %s private: %w", dir, err)
		}
	}
	lock, err := os.OpenFile(path+".lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open lock %s.lock: %w", path, err)
	}
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		lock.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w (%s); stop it first or use another --socket", ErrAlreadyRunning, path)
		}
		return nil, fmt.Errorf("lock %s.lock: %w", path, err)
	}
	fail := func(err error) (*Listener, error) { lock.Close(); return nil, err }
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
	return &Listener{Listener: ln, path: path, lock: lock}, nil
}
