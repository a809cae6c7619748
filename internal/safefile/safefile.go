package safefile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// ErrNotRegular is a path that names something other than a regular file:
// a FIFO, a device, a socket or a directory.
var ErrNotRegular = errors.New("not a regular file")

// ErrTooLarge is a file over the caller's cap.
var ErrTooLarge = errors.New("file too large")

// openFlags: O_NONBLOCK so that opening a FIFO returns at once (it would
// otherwise wait for a writer, forever, while the caller may hold a lock);
// regular files ignore the flag.
const openFlags = os.O_RDONLY | syscall.O_NONBLOCK | syscall.O_CLOEXEC

// Read reads the regular file at path (a symbolic link is followed to one),
// at most max bytes.
func Read(path string, max int64) ([]byte, error) {
	f, err := os.OpenFile(path, openFlags, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readOpened(f, max)
}

// ReadIn reads rel (slash-separated, relative to root) as Read does, without
// leaving root: a link or ".." that leads out of it is an error (os.Root's;
// the standard library does not export it).
func ReadIn(root, rel string, max int64) ([]byte, error) {
	r, err := os.OpenRoot(root)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	f, err := r.OpenFile(filepath.FromSlash(rel), openFlags, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readOpened(f, max)
}

// OpenIn opens rel (slash-separated, relative to root) for reading, for a
// caller that streams a file too large to read whole: a regular file only,
// never blocking on a FIFO or a device, and without leaving root (a link or
// ".." that leads out of it is an error). Bounding what is read from it is
// the caller's part.
func OpenIn(root, rel string) (*os.File, error) {
	r, err := os.OpenRoot(root)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	f, err := r.OpenFile(filepath.FromSlash(rel), openFlags, 0)
	if err != nil {
		return nil, err
	}
	if err := checkRegular(f); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

func checkRegular(f *os.File) error {
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%w (it is a %s)", ErrNotRegular, kind(fi.Mode()))
	}
	return nil
}

func readOpened(f *os.File, max int64) ([]byte, error) {
	if err := checkRegular(f); err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if fi.Size() > max {
		return nil, fmt.Errorf("%w: %d bytes, over %d", ErrTooLarge, fi.Size(), max)
	}
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > max {
		return nil, fmt.Errorf("%w: over %d bytes", ErrTooLarge, max)
	}
	return data, nil
}

// ReadLimited reads r to its end, at most max bytes.
func ReadLimited(r io.Reader, max int64) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > max {
		return nil, fmt.Errorf("%w: over %d bytes", ErrTooLarge, max)
	}
	return data, nil
}

func kind(m fs.FileMode) string {
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
