package filelock

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"time"

	"github.com/gofrs/flock"
)

// retryDelay is how long a waiter sleeps between tries: short against the
// millisecond-long holds of a state save, long enough not to spin.
const retryDelay = 10 * time.Millisecond

// Lock takes an exclusive flock on path, creating the file with perm when
// it is missing, and waits until it is free or ctx ends. The lock is per
// open file description, so goroutines of one process exclude each other
// as well as other processes. unlock releases it (closing the descriptor).
func Lock(ctx context.Context, path string, perm fs.FileMode) (unlock func() error, err error) {
	// Read-write: flock on a read-only descriptor fails on NFS, which
	// emulates flock with fcntl locks.
	l := flock.New(path, flock.SetFlag(os.O_CREATE|os.O_RDWR), flock.SetPermissions(perm))
	ok, err := l.TryLockContext(ctx, retryDelay)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	if !ok { // TryLockContext reports false only with an error; be safe
		return nil, fmt.Errorf("lock %s: not acquired", path)
	}
	return l.Unlock, nil
}
