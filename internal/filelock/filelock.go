package filelock

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"
	"time"

	"github.com/gofrs/flock"
)

// retryDelay is how long a waiter sleeps between tries: short against the
// millisecond-long holds of a state save, long enough not to spin.
const retryDelay = 10 * time.Millisecond

// openFlags: read-write (flock on a read-only descriptor fails on NFS, which
// emulates flock with fcntl locks); O_NOFOLLOW because a lock file sits in
// a directory that may hold anything, and a link planted there would have
// the lock create or lock a file elsewhere; O_NONBLOCK so that nothing
// there can make the open wait.
const openFlags = os.O_CREATE | os.O_RDWR | syscall.O_NOFOLLOW | syscall.O_NONBLOCK | syscall.O_CLOEXEC

// Lock takes an exclusive flock on path, creating the file with perm when
// it is missing, and waits until it is free or ctx ends. The lock is per
// open file description, so goroutines of one process exclude each other
// as well as other processes. unlock releases it (closing the descriptor).
func Lock(ctx context.Context, path string, perm fs.FileMode) (unlock func() error, err error) {
	l := flock.New(path, flock.SetFlag(openFlags), flock.SetPermissions(perm))
	ok, err := l.TryLockContext(ctx, retryDelay)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	if !ok { // TryLockContext reports false only with an error; be safe
		return nil, fmt.Errorf("lock %s: not acquired", path)
	}
	return l.Unlock, nil
}

// ErrHeld is TryLock's answer when another holder has the lock.
var ErrHeld = errors.New("lock held by another process")

// TryLock takes an exclusive flock on path (creating the file with perm)
// without waiting: ErrHeld when someone else holds it. For a lock held for
// a process's lifetime, such as one daemon per socket.
func TryLock(path string, perm fs.FileMode) (unlock func() error, err error) {
	l := flock.New(path, flock.SetFlag(openFlags), flock.SetPermissions(perm))
	ok, err := l.TryLock()
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	if !ok {
		return nil, fmt.Errorf("lock %s: %w", path, ErrHeld)
	}
	return l.Unlock, nil
}
