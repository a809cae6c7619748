package tasks

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"

	"github.com/aimi-tools/swarm/internal/safefile"
)

// Dir is where a repository's task files live, relative to its root
// (slash-separated): the CLI lists it and the daemon takes task files from
// nowhere else.
const Dir = ".aimi/tasks"

// InDir reports whether a repository path (slash separated, relative to
// its root) is a task file's: a .json file under Dir.
func InDir(p string) bool {
	return strings.HasPrefix(p, Dir+"/") && strings.HasSuffix(p, ".json")
}

// MaxFileBytes bounds a task file. Planners write a few KiB; the cap keeps a
// file that is not a task file (a device, a huge blob) from filling memory.
const MaxFileBytes = 4 << 20

// ErrNotRegular is a task file path that names something other than a
// regular file: a FIFO, a device, a socket or a directory.
var ErrNotRegular = safefile.ErrNotRegular

// ErrTooLarge is a task file over MaxFileBytes.
var ErrTooLarge = safefile.ErrTooLarge

// ReadFile reads the task file at path: a regular file of at most
// MaxFileBytes (a symbolic link is followed to one). It never blocks on a
// FIFO or a device and never reads more than MaxFileBytes+1 bytes.
func ReadFile(path string) ([]byte, error) {
	data, err := safefile.Read(path, MaxFileBytes)
	return data, readError(path, err, "")
}

// ReadFileIn reads the task file rel (slash-separated, relative to repo)
// with the rules of ReadFile, and without leaving repo: a symbolic link (or
// "..") that leads out of the repository is refused.
func ReadFileIn(repo, rel string) ([]byte, error) {
	data, err := safefile.ReadIn(repo, rel, MaxFileBytes)
	return data, readError(rel, err, " (task files are regular files inside the repository; a link must not lead out of it)")
}

// ReadLimited reads a task file from r (standard input), at most
// MaxFileBytes.
func ReadLimited(r io.Reader) ([]byte, error) {
	data, err := safefile.ReadLimited(r, MaxFileBytes)
	return data, readError("from standard input", err, "")
}

func readError(name string, err error, openHint string) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrNotRegular):
		return fmt.Errorf("read task file %s: %w; a task file is a regular JSON file", name, err)
	case errors.Is(err, ErrTooLarge):
		return fmt.Errorf("read task file %s: %w; split the plan into several task files", name, err)
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("read task file %s: %w", name, err)
	}
	return fmt.Errorf("read task file %s: %w%s", name, err, openHint)
}
