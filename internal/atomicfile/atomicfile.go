package atomicfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// TempPrefix is the name prefix of the temp files WriteFile and Write make
// for path, in path's directory: a hidden name, so listings and globs of
// the directory skip it.
func TempPrefix(path string) string { return "." + filepath.Base(path) + ".tmp-" }

// WriteFile replaces path with data (mode perm) atomically and durably.
func WriteFile(path string, data []byte, perm fs.FileMode) error {
	return Write(path, perm, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// Write replaces path atomically and durably with what fill writes. When
// fill fails nothing is replaced and its error is returned as it is.
func Write(path string, perm fs.FileMode, fill func(io.Writer) error) (err error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, TempPrefix(path)+"*")
	if err != nil {
		return fmt.Errorf("replace %s: %w", path, err)
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	// CreateTemp makes 0600 whatever the umask; the caller's mode is meant.
	if err = f.Chmod(perm); err != nil {
		return fmt.Errorf("replace %s: %w", path, err)
	}
	if err = fill(f); err != nil {
		return err
	}
	if err = f.Sync(); err != nil {
		return fmt.Errorf("replace %s: fsync: %w", path, err)
	}
	if err = f.Close(); err != nil {
		return fmt.Errorf("replace %s: %w", path, err)
	}
	if err = os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("replace %s: %w", path, err)
	}
	if err = SyncDir(dir); err != nil {
		// The new content is in place; only its durability is in doubt.
		return fmt.Errorf("replace %s: fsync %s: %w", path, dir, err)
	}
	return nil
}

// RemoveTemps deletes temp files of path that a writer killed mid-write
// left behind. Call it only where no live writer of path can run (under
// the lock the writers take).
func RemoveTemps(path string) {
	dir, prefix := filepath.Dir(path), TempPrefix(path)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), prefix) {
			os.Remove(filepath.Join(dir, e.Name()))
		}
	}
}

// SyncDir fsyncs a directory so a rename or create in it is durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// MkdirAll creates dir and its missing parents (mode perm), fsyncing the
// parent of each directory it creates so the new entries survive a crash.
func MkdirAll(dir string, perm fs.FileMode) error {
	if _, err := os.Stat(dir); err == nil {
		return nil
	}
	parent := filepath.Dir(dir)
	if parent != dir {
		if err := MkdirAll(parent, perm); err != nil {
			return err
		}
	}
	if err := os.Mkdir(dir, perm); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	return SyncDir(parent)
}
