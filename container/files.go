package container

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/docker/docker/errdefs"
)

// ReadFile returns the content of one regular file in container id (running
// or stopped: it uses the archive endpoint, which runs nothing in the
// container). found is false when the path does not exist, which the engine
// also answers for a container that does not exist: callers that care
// inspect the container first. A file larger than max bytes is an error
// rather than a prefix, since its content comes from inside the sandbox and
// part of it could be misread as the whole.
func (d *Docker) ReadFile(ctx context.Context, id, file string, max int64) (data []byte, found bool, err error) {
	rc, _, err := d.cli.CopyFromContainer(ctx, id, file)
	if errdefs.IsNotFound(err) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("read %s from container %s: %w", file, id, err)
	}
	defer rc.Close()
	return readRegular(rc, max, file, id)
}

// readRegular returns the file a single-path tar stream holds; a path
// that is not a regular file is an error.
func readRegular(r io.Reader, max int64, file, id string) ([]byte, bool, error) {
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil, false, nil
		}
		if err != nil {
			return nil, false, fmt.Errorf("read %s from container %s: %w", file, id, err)
		}
		if h.Typeflag != tar.TypeReg {
			// A symlink or directory where a file was asked for: the
			// container's content, not an absent file. Saying "not
			// found" would let a caller read it as nothing there.
			return nil, false, fmt.Errorf("read %s from container %s: it is not a regular file (tar type %q)", file, id, h.Typeflag)
		}
		data, err := io.ReadAll(io.LimitReader(tr, max+1))
		if err != nil {
			return nil, false, fmt.Errorf("read %s from container %s: %w", file, id, err)
		}
		if int64(len(data)) > max {
			return nil, false, fmt.Errorf("read %s from container %s: larger than %d bytes", file, id, max)
		}
		return data, true, nil
	}
}

// ReadTree returns dir of container id (running or stopped) as a tar
// stream, entries named from dir's base name down. The content comes from
// inside the sandbox: the caller bounds and checks what it extracts.
func (d *Docker) ReadTree(ctx context.Context, id, dir string) (io.ReadCloser, error) {
	rc, _, err := d.cli.CopyFromContainer(ctx, id, dir)
	if err != nil {
		return nil, fmt.Errorf("read %s from container %s: %w", dir, id, err)
	}
	return rc, nil
}
