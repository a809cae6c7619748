package atomicfile

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func temps(t *testing.T, path string) []string {
	t.Helper()
	ents, err := os.ReadDir(filepath.Dir(path))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), TempPrefix(path)) {
			out = append(out, e.Name())
		}
	}
	return out
}

func TestWriteFile(t *testing.T) {
	cases := []struct {
		name string
		old  string // "" = no file yet
		perm os.FileMode
	}{
		{"creates a missing file with the given mode", "", 0o600},
		{"replaces an existing file and sets the mode", "old content", 0o644},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "f.json")
			if tc.old != "" {
				if err := os.WriteFile(path, []byte(tc.old), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			if err := WriteFile(path, []byte("new"), tc.perm); err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(path)
			if err != nil || string(b) != "new" {
				t.Fatalf("content %q, %v; want new", b, err)
			}
			fi, _ := os.Stat(path)
			if fi.Mode().Perm() != tc.perm {
				t.Errorf("mode %v, want %v", fi.Mode().Perm(), tc.perm)
			}
			if left := temps(t, path); len(left) > 0 {
				t.Errorf("temp files left: %v", left)
			}
		})
	}
}

func TestWriteFailingFillKeepsTheOldFileAndNoTemp(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(path, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	err := Write(path, 0o644, func(w io.Writer) error {
		_, _ = w.Write([]byte("half"))
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("err %v, want the fill's error", err)
	}
	if b, _ := os.ReadFile(path); string(b) != "old" {
		t.Errorf("content %q, want old", b)
	}
	if left := temps(t, path); len(left) > 0 {
		t.Errorf("temp files left: %v", left)
	}
}

func TestWriteIntoMissingDirectoryFailsWithThePath(t *testing.T) {
	path := filepath.Join(t.TempDir(), "missing", "f")
	err := WriteFile(path, []byte("x"), 0o644)
	if err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("err %v, want one naming %s", err, path)
	}
}

func TestRemoveTempsRemovesOnlyThatFilesTemps(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state.json")
	stale := filepath.Join(dir, TempPrefix(path)+"123")
	other := filepath.Join(dir, TempPrefix(filepath.Join(dir, "other"))+"123")
	for _, p := range []string{stale, other} {
		if err := os.WriteFile(p, nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	RemoveTemps(path)
	if _, err := os.Stat(stale); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("stale temp still there: %v", err)
	}
	if _, err := os.Stat(other); err != nil {
		t.Errorf("another file's temp was removed: %v", err)
	}
}

func TestMkdirAllCreatesParents(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "b", "c")
	if err := MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		t.Fatalf("stat %s: %v", dir, err)
	}
	if err := MkdirAll(dir, 0o755); err != nil {
		t.Fatalf("existing directory: %v", err)
	}
}
