// Package filelock takes the advisory, exclusive flock(2) locks that aimi
// shares with other processes (the state file's lock, which the aimi shell
// tools take too, and the sandbox image cache's). Waiting honours ctx: flock
// itself has no timeout, so a waiter retries a non-blocking lock. The
// locking is github.com/gofrs/flock's; this package is the one place that
// says how aimi waits and how a lock file is created.
package filelock
