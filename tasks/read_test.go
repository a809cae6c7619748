package tasks

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// readWithin fails the test when read does not return within d: a reader
// that blocks (a FIFO without a writer) must not hang its caller.
func readWithin(t *testing.T, d time.Duration, read func() ([]byte, error)) ([]byte, error) {
	t.Helper()
	type result struct {
		data []byte
		err  error
	}
	done := make(chan result, 1)
	go func() { data, err := read(); done <- result{data, err} }()
	select {
	case r := <-done:
		return r.data, r.err
	case <-time.After(d):
		t.Fatalf("the read did not return within %v", d)
		return nil, nil
	}
}

func TestReadFileInReadsOnlyRegularFilesInsideTheRepository(t *testing.T) {
	repo := t.TempDir()
	dir := filepath.Join(repo, ".aimi", "tasks")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	outside := filepath.Join(t.TempDir(), "secret.json")
	os.WriteFile(outside, []byte(`{"secret":true}`), 0o644)
	os.WriteFile(filepath.Join(dir, "ok-tasks.json"), []byte(`{}`), 0o644)
	os.WriteFile(filepath.Join(dir, "big-tasks.json"), make([]byte, MaxFileBytes+1), 0o644)
	os.Symlink("ok-tasks.json", filepath.Join(dir, "inside-tasks.json"))
	os.Symlink(outside, filepath.Join(dir, "out-tasks.json"))
	os.Symlink("../../../"+filepath.Base(filepath.Dir(outside)), filepath.Join(dir, "rel-out"))
	os.Symlink("/dev/zero", filepath.Join(dir, "zero-tasks.json"))
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo-tasks.json"), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Mkdir(filepath.Join(dir, "dir-tasks.json"), 0o755)

	for _, tc := range []struct {
		name, rel string
		want      string // substring of the error; "" means read
		is        error
	}{
		{"regular file is read", ".aimi/tasks/ok-tasks.json", "", nil},
		{"link inside the repository is followed", ".aimi/tasks/inside-tasks.json", "", nil},
		{"link out of the repository is refused", ".aimi/tasks/out-tasks.json", "lead out", nil},
		{"link to /dev/zero is refused without reading it", ".aimi/tasks/zero-tasks.json", "lead out", nil},
		{"dot-dot out of the repository is refused", "../x.json", "lead out", nil},
		{"FIFO is refused at once", ".aimi/tasks/fifo-tasks.json", "FIFO", ErrNotRegular},
		{"directory is refused", ".aimi/tasks/dir-tasks.json", "directory", ErrNotRegular},
		{"file over the cap is refused", ".aimi/tasks/big-tasks.json", "split the plan", ErrTooLarge},
		{"missing file says so", ".aimi/tasks/none-tasks.json", "no such file", os.ErrNotExist},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data, err := readWithin(t, 10*time.Second, func() ([]byte, error) { return ReadFileIn(repo, tc.rel) })
			if tc.want == "" {
				if err != nil || string(data) != "{}" {
					t.Fatalf("got %q, %v", data, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) || (tc.is != nil && !errors.Is(err, tc.is)) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

func TestReadFileRefusesDevicesAndFIFOsWithoutBlocking(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo.json")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "zero.json")
	os.Symlink("/dev/zero", link)
	for _, p := range []string{fifo, link, "/dev/zero"} {
		_, err := readWithin(t, 10*time.Second, func() ([]byte, error) { return ReadFile(p) })
		if !errors.Is(err, ErrNotRegular) {
			t.Errorf("ReadFile(%s) = %v, want ErrNotRegular", p, err)
		}
	}
	if _, err := ReadLimited(strings.NewReader(strings.Repeat(" ", MaxFileBytes+1))); !errors.Is(err, ErrTooLarge) {
		t.Errorf("ReadLimited over the cap = %v", err)
	}
}
