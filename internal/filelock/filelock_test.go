package filelock

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

func TestLockExcludesASecondHolderUntilUnlocked(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.lock")
	unlock, err := Lock(context.Background(), path, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		u, err := Lock(context.Background(), path, 0o644)
		if err == nil {
			err = u()
		}
		got <- err
	}()
	// The second locker must still be waiting: a short deadline of its own
	// proves it cannot get the lock while the first holds it.
	short, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := Lock(short, path, 0o644); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("third locker while held: %v, want deadline exceeded", err)
	}
	if err := unlock(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("second locker: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("second locker never got the lock after unlock")
	}
}

func TestLockCreatesTheFileWithTheMode(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.lock")
	unlock, err := Lock(context.Background(), path, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	// The umask may only take bits away.
	if fi.Mode().Perm()&^0o644 != 0 || fi.Mode().Perm()&0o600 != 0o600 {
		t.Errorf("mode %v, want 0644 less the umask", fi.Mode().Perm())
	}
}

// The shell tools take the same lock with flock(1): it must see ours.
func TestLockIsTheOneFlock1Takes(t *testing.T) {
	bin, err := exec.LookPath("flock")
	if err != nil {
		t.Fatalf("flock(1) (util-linux) is needed: %v", err)
	}
	path := filepath.Join(t.TempDir(), "x.lock")
	unlock, err := Lock(context.Background(), path, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if err := exec.Command(bin, "-n", path, "true").Run(); err == nil {
		t.Fatal("flock -n got the lock while we held it")
	}
	if err := unlock(); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(bin, "-n", path, "true").CombinedOutput(); err != nil {
		t.Fatalf("flock -n after unlock: %v %s", err, out)
	}
}

func TestTryLockSaysHeldWithoutWaiting(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.lock")
	unlock, err := TryLock(path, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := TryLock(path, 0o600); !errors.Is(err, ErrHeld) {
		t.Fatalf("second TryLock: %v, want ErrHeld", err)
	}
	if err := unlock(); err != nil {
		t.Fatal(err)
	}
	again, err := TryLock(path, 0o600)
	if err != nil {
		t.Fatalf("TryLock after unlock: %v", err)
	}
	again()
}

// A lock file lives next to what it guards, in a repository that may hold
// anything: a link planted there is not followed (it would create or lock
// a file elsewhere).
func TestLockRefusesALink(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(t.TempDir(), "elsewhere")
	link := filepath.Join(dir, "x.lock")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if unlock, err := Lock(context.Background(), link, 0o644); err == nil {
		unlock()
		t.Error("Lock took a lock through a link")
	}
	if unlock, err := TryLock(link, 0o644); err == nil {
		unlock()
		t.Error("TryLock took a lock through a link")
	}
	if _, err := os.Lstat(target); err == nil {
		t.Error("locking through the link created the file it leads to")
	}
}
