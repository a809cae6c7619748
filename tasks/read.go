package tasks

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// MaxFileBytes bounds a task file. Planners write a few KiB; the cap keeps a
// file that is not a task file (a device, a huge blob) from filling memory.
const MaxFileBytes = 4 << 20

// ErrNotRegular is a task file path that names something other than a
// regular file: a FIFO, a device, a socket or a directory.
var ErrNotRegular = errors.New("not a regular file")

// ErrTooLarge is a task file over MaxFileBytes.
var ErrTooLarge = fmt.Errorf("larger than %d bytes", MaxFileBytes)

// openFlags: O_NONBLOCK so that opening a FIFO returns at once (it would
// otherwise wait for a writer, forever, while the caller may hold a lock);
// regular files ignore the flag.
const openFlags = os.O_RDONLY | syscall.O_NONBLOCK | syscall.O_CLOEXEC

// ReadFile reads the task file at path: a regular file of at most
// MaxFileBytes (a symbolic link is followed to one). It never blocks on a
// FIFO or a device and never reads more than MaxFileBytes+1 bytes.
func ReadFile(path string) ([]byte, error) {
	f, err := os.OpenFile(path, openFlags, 0)
	if err != nil {
		return nil, fmt.Errorf("read task file: %w", err)
	}
	defer f.Close()
	return readOpened(f, path)
}

// ReadFileIn reads the task file rel (slash-separated, relative to repo)
// with the rules of ReadFile, and without leaving repo: a symbolic link (or
// "..") that leads out of the repository is refused.
func ReadFileIn(repo, rel string) ([]byte, error) {
	root, err := os.OpenRoot(repo)
	if err != nil {
		return nil, fmt.Errorf("read task file: open repository %s: %w", repo, err)
	}
	defer root.Close()
	name := filepath.FromSlash(rel)
	f, err := root.OpenFile(name, openFlags, 0)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("read task file %s: %w", rel, err)
		}
		return nil, fmt.Errorf("read task file %s: %w (task files are regular files inside the repository; a link must not lead out of it)", rel, err)
	}
	defer f.Close()
	return readOpened(f, rel)
}

func readOpened(f *os.File, name string) ([]byte, error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("read task file %s: %w", name, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("read task file %s: %w (it is a %s); a task file is a regular JSON file", name, ErrNotRegular, fileKind(fi.Mode()))
	}
	if fi.Size() > MaxFileBytes {
		return nil, fmt.Errorf("read task file %s: %w (%d bytes); split the plan into several task files", name, ErrTooLarge, fi.Size())
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read task file %s: %w", name, err)
	}
	if len(data) > MaxFileBytes {
		return nil, fmt.Errorf("read task file %s: %w; split the plan into several task files", name, ErrTooLarge)
	}
	return data, nil
}

// ReadLimited reads a task file from r (standard input), at most
// MaxFileBytes.
func ReadLimited(r io.Reader) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read task file: %w", err)
	}
	if len(data) > MaxFileBytes {
		return nil, fmt.Errorf("read task file: %w; split the plan into several task files", ErrTooLarge)
	}
	return data, nil
}

func fileKind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "directory"
	case m&fs.ModeNamedPipe != 0:
		return "FIFO"
	case m&fs.ModeSocket != 0:
		return "socket"
	case m&fs.ModeCharDevice != 0:
		return "character device"
	case m&fs.ModeDevice != 0:
		return "device"
	}
	return "special file"
}
