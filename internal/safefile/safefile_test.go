package safefile

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// within fails t when fn does not return within a few seconds: the reads
// under test must never block.
func within(t *testing.T, fn func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- fn() }()
	select {
	case err := <-done:
		return err
	case <-time.After(5 * time.Second):
		t.Fatal("blocked")
		return nil
	}
}

func TestOpenInRefusesWhatIsNotARegularFileInTheRoot(t *testing.T) {
	root := t.TempDir()
	outside := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(outside, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "ok"), []byte("ok\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(root, "fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, target := range map[string]string{"zero": "/dev/zero", "out": outside, "in": "ok"} {
		if err := os.Symlink(target, filepath.Join(root, name)); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		rel     string
		regular bool // the error is ErrNotRegular
		ok      bool
	}{
		{rel: "ok", ok: true},
		{rel: "in", ok: true},
		{rel: "fifo", regular: true},
		{rel: "zero"}, // a link out of the root, to a device
		{rel: "out"},
		{rel: "../" + filepath.Base(root) + "/ok", ok: false},
	} {
		err := within(t, func() error {
			f, err := OpenIn(root, tc.rel)
			if err == nil {
				f.Close()
			}
			return err
		})
		switch {
		case tc.ok && err != nil:
			t.Errorf("OpenIn(%s) = %v, want it opened", tc.rel, err)
		case !tc.ok && err == nil:
			t.Errorf("OpenIn(%s) opened it, want an error", tc.rel)
		case tc.regular && !errors.Is(err, ErrNotRegular):
			t.Errorf("OpenIn(%s) = %v, want ErrNotRegular", tc.rel, err)
		}
	}
}

func TestReadInCapsAndNeverBlocks(t *testing.T) {
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "big"), make([]byte, 101), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(root, "fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadIn(root, "big", 100); !errors.Is(err, ErrTooLarge) {
		t.Errorf("ReadIn(big) = %v, want ErrTooLarge", err)
	}
	if err := within(t, func() error { _, err := ReadIn(root, "fifo", 100); return err }); !errors.Is(err, ErrNotRegular) {
		t.Errorf("ReadIn(fifo) = %v, want ErrNotRegular", err)
	}
}
