package state

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/aimi-tools/swarm/internal/safefile"
)

// MaxStateBytes bounds the state file when reading. A swarm of a hundred
// containers writes some tens of KiB; the cap keeps a file that is not a
// state file (a device, a huge blob) from filling memory.
const MaxStateBytes = 8 << 20

// readStateFile reads the store's state file as safefile.ReadIn does:
// regular, at most MaxStateBytes, never blocking, not through a link out of
// the repository (the file is the repository's, and so is anything a clone
// or an agent put there).
func (s *Store) readStateFile() ([]byte, error) {
	b, err := safefile.ReadIn(s.root, filepath.ToSlash(filepath.Join(DirName, StateFileName)), MaxStateBytes)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%w; the state file must be a regular file of at most %d bytes inside the repository: remove it to start over", err, MaxStateBytes)
	}
	return b, err
}

// openJournalRead opens a journal for reading: a regular file, opened
// without blocking, and, for a journal in its place in a repository
// (<repo>/.aimi/swarm/<swarmId>/<name>.ndjson), never through a link out of
// that repository; any other path may not leave its directory. Records are
// bounded by the reader (maxRecordBytes).
func openJournalRead(path string) (*os.File, error) {
	root, rel := journalRoot(path)
	return safefile.OpenIn(root, filepath.ToSlash(rel))
}

// openJournalAppend opens (creating) a journal for appending with the rules
// of openJournalRead: what the daemon writes stays in the repository, and a
// link planted where a journal goes is never written through.
func openJournalAppend(path string) (*os.File, error) {
	root, rel := journalRoot(path)
	r, err := os.OpenRoot(root)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	f, err := r.OpenFile(rel, os.O_RDWR|os.O_CREATE|os.O_APPEND|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("%w (a journal is a regular file inside the repository)", err)
	}
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = fmt.Errorf("%s: %w (mode %s)", path, safefile.ErrNotRegular, fi.Mode().Type())
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// journalRoot is the directory a journal must not leave and the journal's
// path inside it.
func journalRoot(path string) (root, rel string) {
	root, rel = filepath.Dir(path), filepath.Base(path)
	swarmDir := filepath.Dir(path)
	journals := filepath.Dir(swarmDir)
	aimi := filepath.Dir(journals)
	if filepath.Base(journals) == JournalDir && filepath.Base(aimi) == DirName {
		root = filepath.Dir(aimi)
		rel = filepath.Join(DirName, JournalDir, filepath.Base(swarmDir), filepath.Base(path))
	}
	return root, rel
}

// ReadFile returns the state file's bytes as they are on disk, read with
// Load's bounds; a missing file is ErrNoState.
func (s *Store) ReadFile() ([]byte, error) {
	b, err := s.readStateFile()
	if errors.Is(err, os.ErrNotExist) {
		return nil, ErrNoState
	}
	if err != nil {
		return nil, fmt.Errorf("read swarm state: %w", err)
	}
	return b, nil
}

// CheckJournal reports why the journal at path cannot be read: a FIFO, a
// device, a link out of the repository. A missing journal is no error (it
// is written once its container says something).
func CheckJournal(path string) error {
	f, err := openJournalRead(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read journal %s: %w", path, err)
	}
	return f.Close()
}
