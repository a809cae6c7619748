package state

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/aimi-tools/swarm/internal/atomicfile"
)

// journal is one container's journal file. buf and pos are guarded by
// Recorder.mu; f, pending and size belong to the loop.
type journal struct {
	path    string
	f       *os.File
	buf     []byte // records not yet taken by a batch
	pos     Position
	inBatch bool // a batch is committing pending; the file must stay open

	cap capState

	pending []byte // taken by a batch, not yet durable (kept on failure)
	size    int64  // durable length of the file
}

// openJournal opens (creating) a journal for appending, makes its directory
// entry durable, cuts a torn last line and reads where it ends.
func openJournal(path string) (*journal, error) {
	dir := filepath.Dir(path)
	if err := atomicfile.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create journal directory: %w", err)
	}
	f, err := openJournalAppend(path)
	if err != nil {
		return nil, fmt.Errorf("open journal: %w", err)
	}
	size, err := cutTornTail(f)
	if err == nil {
		err = f.Sync()
	}
	if err == nil {
		err = atomicfile.SyncDir(dir)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("open journal %s: %w", path, err)
	}
	pos, noted, err := lastPosition(path)
	if err != nil {
		f.Close()
		return nil, err
	}
	return &journal{path: path, f: f, size: size, pos: pos, cap: capState{bytes: size, noted: noted}}, nil
}

// cutTornTail truncates the file after its last newline and returns the new
// size. A tail without a newline is a record whose append was interrupted;
// no state was saved from it (see the package doc).
func cutTornTail(f *os.File) (int64, error) {
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	size := st.Size()
	const chunk = 64 << 10
	buf := make([]byte, chunk)
	end := size
	for end > 0 {
		start := max(end-chunk, 0)
		n, err := f.ReadAt(buf[:end-start], start)
		if err != nil && err != io.EOF {
			return 0, err
		}
		if i := bytes.LastIndexByte(buf[:n], '\n'); i >= 0 {
			end = start + int64(i) + 1
			break
		}
		end = start
	}
	if end != size {
		if err := f.Truncate(end); err != nil {
			return 0, err
		}
	}
	return end, nil
}

// commit appends the pending records and fsyncs. On failure the file is cut
// back to its durable length and the records stay pending for a retry.
func (j *journal) commit() error {
	if _, err := j.f.Write(j.pending); err != nil {
		_ = j.f.Truncate(j.size)
		return fmt.Errorf("append journal %s: %w", j.path, err)
	}
	if err := j.f.Sync(); err != nil {
		_ = j.f.Truncate(j.size)
		return fmt.Errorf("fsync journal %s: %w", j.path, err)
	}
	j.size += int64(len(j.pending))
	j.pending = j.pending[:0]
	return nil
}
