package state

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/internal/safefile"
)

// returns fails t when fn has not returned within a few seconds: reading
// the repository's files must never block.
func returns(t *testing.T, fn func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- fn() }()
	select {
	case err := <-done:
		return err
	case <-time.After(5 * time.Second):
		t.Fatal("blocked reading a file a repository may hold")
		return nil
	}
}

// plant makes path what kind says: a FIFO, a link to a device, a link to a
// valid file outside the repository, or a file over the cap.
func plant(t *testing.T, path, kind string, valid []byte, over int64) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	var err error
	switch kind {
	case "fifo":
		err = syscall.Mkfifo(path, 0o600)
	case "zero":
		err = os.Symlink("/dev/zero", path)
	case "outside":
		out := filepath.Join(t.TempDir(), "elsewhere")
		if err := os.WriteFile(out, valid, 0o600); err != nil {
			t.Fatal(err)
		}
		err = os.Symlink(out, path)
	case "huge":
		b := make([]byte, over+1)
		for i := range b {
			b[i] = ' '
		}
		copy(b, valid)
		err = os.WriteFile(path, b, 0o600)
	}
	if err != nil {
		t.Fatal(err)
	}
}

func TestLoadAndReadFileReadOnlyARegularBoundedStateFileInTheRepository(t *testing.T) {
	valid, err := json.Marshal(newTestSwarm("aimi-a"))
	if err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{"fifo", "zero", "outside", "huge"} {
		t.Run(kind, func(t *testing.T) {
			s := Open(t.TempDir())
			plant(t, s.Path(), kind, valid, MaxStateBytes)
			err := returns(t, func() error { _, err := s.Load(context.Background()); return err })
			if err == nil {
				t.Fatal("Load read it; want an error")
			}
			var ce *CorruptError
			if errors.As(err, &ce) {
				t.Errorf("Load = %v, want a read error, not a corrupt state", err)
			}
			if kind == "huge" && !errors.Is(err, safefile.ErrTooLarge) {
				t.Errorf("Load = %v, want ErrTooLarge", err)
			}
			if err := returns(t, func() error { _, err := s.ReadFile(); return err }); err == nil {
				t.Error("ReadFile read it; want an error")
			}
			if _, err := os.Lstat(s.Path()); err != nil {
				t.Errorf("the state file was moved: %v", err)
			}
		})
	}
}

func TestJournalReadersReadOnlyRegularFilesInTheRepository(t *testing.T) {
	valid := []byte(`{"seq":1,"cursor":"","time":"2026-11-22T10:00:00Z","stream":"stdout","raw":"hi"}` + "\n")
	readers := map[string]func(path string) error{
		"ReadJournal":     func(p string) error { _, err := ReadJournal(p); return err },
		"ScanJournalFrom": func(p string) error { _, err := ScanJournalFrom(p, 0, func(Record) error { return nil }); return err },
		"JournalStart":    func(p string) error { _, err := JournalStart(p, From{Tail: 1}); return err },
		"LastPosition":    func(p string) error { _, err := LastPosition(p); return err },
		"RestoreTracker":  func(p string) error { _, _, err := RestoreTracker(p, pendingFile(1)); return err },
	}
	for _, kind := range []string{"fifo", "zero", "outside"} {
		for name, read := range readers {
			t.Run(kind+"/"+name, func(t *testing.T) {
				path := Open(t.TempDir()).JournalPath(contract.Sandbox{Swarm: "s1", Container: "aimi-a"})
				plant(t, path, kind, valid, 0)
				err := returns(t, func() error { return read(path) })
				if err == nil {
					t.Fatalf("%s read a %s journal; want an error", name, kind)
				}
				if kind == "fifo" && !errors.Is(err, safefile.ErrNotRegular) {
					t.Errorf("%s of a FIFO = %v, want ErrNotRegular", name, err)
				}
			})
		}
	}
	// A regular journal inside the repository still reads.
	path := Open(t.TempDir()).JournalPath(contract.Sandbox{Swarm: "s1", Container: "aimi-a"})
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, valid, 0o600); err != nil {
		t.Fatal(err)
	}
	for name, read := range readers {
		if err := read(path); err != nil {
			t.Errorf("%s of a regular journal: %v", name, err)
		}
	}
	if _, err := ReadJournal(path + ".missing"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("ReadJournal of a missing journal = %v, want ErrNotExist", err)
	}
}

// The daemon appends to journals: never through a link out of the
// repository, and never onto a FIFO or a device.
func TestOpenJournalStaysInTheRepository(t *testing.T) {
	for _, kind := range []string{"fifo", "zero", "outside", "dirlink"} {
		t.Run(kind, func(t *testing.T) {
			repo := t.TempDir()
			path := Open(repo).JournalPath(contract.Sandbox{Swarm: "s1", Container: "aimi-a"})
			if kind == "dirlink" {
				out := t.TempDir()
				if err := os.MkdirAll(filepath.Join(repo, DirName), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.Symlink(out, filepath.Join(repo, DirName, JournalDir)); err != nil {
					t.Fatal(err)
				}
			} else {
				plant(t, path, kind, []byte("a file of the user's\nwithout a final newline"), 0)
			}
			err := returns(t, func() error {
				j, err := openJournal(path)
				if err == nil {
					j.f.Close()
				}
				return err
			})
			if err == nil {
				t.Fatalf("openJournal opened a %s journal; want an error", kind)
			}
			if kind == "outside" {
				target, _ := os.Readlink(path)
				if b, _ := os.ReadFile(target); string(b) != "a file of the user's\nwithout a final newline" {
					t.Errorf("the file the link leads to was changed: %q", b)
				}
			}
		})
	}
	path := Open(t.TempDir()).JournalPath(contract.Sandbox{Swarm: "s1", Container: "aimi-a"})
	j, err := openJournal(path)
	if err != nil {
		t.Fatalf("openJournal of a new journal: %v", err)
	}
	j.f.Close()
}
