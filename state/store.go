package state

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/internal/atomicfile"
	"github.com/aimi-tools/swarm/internal/filelock"
)

// File locations, relative to the repository root. The shell tools use the
// same names.
const (
	DirName       = ".aimi"                 // per-repository aimi directory
	StateFileName = "swarm-state.json"      // aggregate state, in DirName
	LockFileName  = "swarm-state.json.lock" // flock(LOCK_EX) taken around every write, in DirName
	JournalDir    = "swarm"                 // journals: DirName/JournalDir/<swarmId>/<containerName>.ndjson
	corruptSuffix = ".corrupt-"             // swarm-state.json.corrupt-<UTC time>
)

// IsDaemonFile reports whether p, a slash-separated path relative to the
// repository root, is one of the files the daemon writes there (the state
// file, its lock, a journal, or one a save set aside): a repository that
// commits them (no .gitignore) still has no runner read them.
func IsDaemonFile(p string) bool {
	rest, ok := strings.CutPrefix(p, DirName+"/")
	if !ok {
		return false
	}
	return rest == StateFileName || rest == LockFileName || strings.HasPrefix(rest, JournalDir+"/") ||
		strings.HasPrefix(rest, StateFileName+corruptSuffix)
}

// ErrNoState is returned by Load when the state file does not exist.
var ErrNoState = errors.New("no swarm state file (start a swarm with 'aimi swarm start')")

// CorruptError is a state file that cannot be read: empty, not a swarm
// state, or a field of a type no reading makes sense of. Readers leave the
// file as it is (MovedTo is ""); only a save that replaces a file holding
// no JSON object at all moves it aside first, to MovedTo.
type CorruptError struct {
	Path    string // the state file
	MovedTo string // where the corrupt content now is; "" when it was left in place
	Err     error  // why it did not parse
}

func (e *CorruptError) Error() string {
	if e.MovedTo == "" {
		return fmt.Sprintf("cannot read swarm state %s: %v; it was left as it is: correct it, or remove it to start over", e.Path, e.Err)
	}
	return fmt.Sprintf("swarm state %s was corrupt (%v) and was moved to %s; inspect it, or start a new swarm", e.Path, e.Err, e.MovedTo)
}

func (e *CorruptError) Unwrap() error { return e.Err }

// Store is one repository's .aimi/swarm-state.json. Its methods are safe for
// concurrent use by goroutines and processes: writes are serialised by the
// flock, reads rely on atomic rename.
type Store struct {
	root      string
	dir       string
	path      string
	lockPath  string
	cleanOnce sync.Once
}

// Open returns the store of the repository at repoRoot. It touches nothing
// on disk until used.
func Open(repoRoot string) *Store {
	dir := filepath.Join(repoRoot, DirName)
	return &Store{
		root:     repoRoot,
		dir:      dir,
		path:     filepath.Join(dir, StateFileName),
		lockPath: filepath.Join(dir, LockFileName),
	}
}

// Path is the state file's path.
func (s *Store) Path() string { return s.path }

// Root is the repository root the store was opened on.
func (s *Store) Root() string { return s.root }

// JournalPath is the journal of container sb.
func (s *Store) JournalPath(sb contract.Sandbox) string {
	return filepath.Join(s.SwarmJournals(sb.Swarm), sb.Container+".ndjson")
}

// LandJournalPath is the journal of swarm swarmID's lands.
func (s *Store) LandJournalPath(swarmID string) string {
	return filepath.Join(s.SwarmJournals(swarmID), LandJournal+".ndjson")
}

// SwarmJournals is the directory of a swarm's journals (and of the
// daemon's other per-swarm files beside them).
func (s *Store) SwarmJournals(swarmID string) string {
	return filepath.Join(s.dir, JournalDir, swarmID)
}

// RemoveJournals deletes the journals (.aimi/swarm/<swarmId>/) of every
// swarm keep does not name, and returns the ids it removed. Cleanup calls
// it for the swarms a newer start replaced: nothing reads their journals
// any more (logs shows the current swarm's).
func (s *Store) RemoveJournals(keep func(swarmID string) bool) ([]string, error) {
	dir := filepath.Join(s.dir, JournalDir)
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list journals: %w", err)
	}
	var removed []string
	var errs []error
	for _, e := range ents {
		if !e.IsDir() || keep(e.Name()) {
			continue
		}
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			errs = append(errs, fmt.Errorf("remove journals of swarm %s: %w", e.Name(), err))
			continue
		}
		removed = append(removed, e.Name())
	}
	return removed, errors.Join(errs...)
}

// Load reads the state file without taking the lock (rename is atomic). A
// missing file is ErrNoState; one that cannot be read is a *CorruptError.
// Load never changes the file: reading is what every tool sharing it may do
// at any time, and a file one reader cannot read may be another's to fix.
func (s *Store) Load(ctx context.Context) (*Swarm, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	sw, _, err := s.read()
	var perr *parseError
	if errors.As(err, &perr) {
		return nil, &CorruptError{Path: s.path, Err: perr.err}
	}
	return sw, err
}

// parseError marks content that is not a swarm state.
type parseError struct{ err error }

func (e *parseError) Error() string { return e.err.Error() }
func (e *parseError) Unwrap() error { return e.err }

// read reads and decodes the file, returning its content too.
func (s *Store) read() (*Swarm, []byte, error) {
	b, err := s.readStateFile()
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, ErrNoState
	}
	if err != nil {
		return nil, nil, fmt.Errorf("read swarm state: %w", err)
	}
	sw, err := Decode(b)
	if err != nil {
		return nil, b, &parseError{err}
	}
	return sw, b, nil
}

// Decode parses the content of a state file. Empty content, anything but one
// JSON object, a missing swarmId and a value of the wrong type are errors,
// the last naming its field (containers[0].acpPid). An integer written as a
// string and an unset prUrl or acpPid written as "" are read as what they
// mean: the shell tools write them so. Unknown fields are ignored (and
// dropped on the next save): the schema has none, but a reader must not
// fail on another tool's mistake.
func Decode(b []byte) (*Swarm, error) {
	if len(bytes.TrimSpace(b)) == 0 {
		return nil, errors.New("file is empty")
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	var sw Swarm
	if err := dec.Decode(&sw); err != nil {
		var fe *fieldError
		if errors.As(err, &fe) {
			return nil, err
		}
		return nil, fmt.Errorf("not a swarm state: %w", err)
	}
	if dec.More() {
		return nil, errors.New("not a swarm state: content after the JSON object")
	}
	if sw.SwarmID == "" {
		return nil, errors.New("not a swarm state: swarmId is missing")
	}
	for i, c := range sw.Containers {
		if c == nil {
			return nil, fmt.Errorf("not a swarm state: containers[%d] is null", i)
		}
	}
	return &sw, nil
}

// moveAsideLocked renames a file holding no JSON object at all (empty,
// torn, garbage) aside before a save replaces it, so its bytes stay
// inspectable. A file that is a JSON object with a field no reading accepts
// is not moved: the save fails naming the field, and the file waits for
// whoever wrote it. The caller holds the lock and has just read the file.
func (s *Store) moveAsideLocked(cerr *CorruptError) bool {
	var fe *fieldError
	if errors.As(cerr.Err, &fe) {
		return false
	}
	aside := s.path + corruptSuffix + time.Now().UTC().Format("20060102T150405.000000000Z")
	if err := os.Rename(s.path, aside); err != nil {
		return false
	}
	cerr.MovedTo = aside
	_ = atomicfile.SyncDir(s.dir)
	return true
}

// Save writes the swarm atomically under the lock. A swarm that would not
// validate against the schema is refused.
func (s *Store) Save(ctx context.Context, sw *Swarm) error {
	if err := sw.Validate(); err != nil {
		return fmt.Errorf("refusing to save an invalid swarm state: %w", err)
	}
	return s.withLock(ctx, func() error { return s.writeLocked(sw) })
}

// Update locks the file, loads it, lets fn mutate it and saves the result,
// so edits other tools made in between are not clobbered. A missing file is
// ErrNoState, a corrupt one *CorruptError; fn is not called then. If fn
// returns an error nothing is written. What fn adds or changes must
// validate; entries it leaves as the file had them are written back as they
// were, valid or not (they are the business of the tool that wrote them).
func (s *Store) Update(ctx context.Context, fn func(*Swarm) error) error {
	return s.update(ctx, func(cur *Swarm) (*Swarm, error) {
		if cur == nil {
			return nil, ErrNoState
		}
		if err := fn(cur); err != nil {
			return nil, err
		}
		return cur, nil
	}, nil)
}

// update is Update where fn sees nil for a missing file, and, when
// onCorrupt is set, for one holding no JSON object too (after it was moved
// aside and onCorrupt told).
func (s *Store) update(ctx context.Context, fn func(cur *Swarm) (*Swarm, error), onCorrupt func(*CorruptError)) error {
	return s.withLock(ctx, func() error {
		cur, _, err := s.read()
		var perr *parseError
		if errors.As(err, &perr) {
			err = &CorruptError{Path: s.path, Err: perr.err}
		}
		var cerr *CorruptError
		switch {
		case err == nil, errors.Is(err, ErrNoState):
		case onCorrupt != nil && errors.As(err, &cerr) && s.moveAsideLocked(cerr):
			onCorrupt(cerr)
			cur = nil
		default:
			return err
		}
		// Entries another tool wrote and this update leaves as they are
		// are that tool's business: only what changes must validate, so
		// one foreign, out-of-schema entry cannot stop every later save.
		var unchanged map[string]bool
		if cur != nil {
			unchanged = make(map[string]bool, len(cur.Containers))
			for _, c := range cur.Containers {
				if b, err := json.Marshal(c); err == nil {
					unchanged[string(b)] = true
				}
			}
		}
		next, err := fn(cur)
		if err != nil {
			return err
		}
		if err := next.validate(unchanged); err != nil {
			return fmt.Errorf("refusing to save an invalid swarm state: %w", err)
		}
		return s.writeLocked(next)
	})
}

// Remove deletes the state file under the lock. A missing file is not an
// error. Journals are left alone: they are what `aimi swarm logs` shows.
func (s *Store) Remove(ctx context.Context) error {
	return s.withLock(ctx, func() error {
		err := os.Remove(s.path)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("remove swarm state: %w", err)
		}
		return atomicfile.SyncDir(s.dir)
	})
}

// writeLocked writes the file atomically (internal/atomicfile). Temp
// files a writer killed mid-save left are removed first: the lock is held,
// so no live writer of ours owns one.
func (s *Store) writeLocked(sw *Swarm) error {
	b, err := json.MarshalIndent(sw, "", "  ")
	if err != nil {
		return fmt.Errorf("encode swarm state: %w", err)
	}
	b = append(b, '\n')
	s.cleanOnce.Do(func() { atomicfile.RemoveTemps(s.path) })
	// 0644: the state file is read by other tools.
	if err := atomicfile.WriteFile(s.path, b, 0o644); err != nil {
		return fmt.Errorf("write swarm state: %w", err)
	}
	return nil
}

// withLock runs fn holding flock(LOCK_EX) on the lock file (the shell
// tools' lock), creating .aimi if needed.
func (s *Store) withLock(ctx context.Context, fn func() error) error {
	if err := os.MkdirAll(s.dir, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", s.dir, err)
	}
	unlock, err := filelock.Lock(ctx, s.lockPath, 0o644)
	if err != nil {
		return fmt.Errorf("%w (another aimi tool holds it)", err)
	}
	defer unlock()
	return fn()
}
