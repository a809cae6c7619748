package gitserve

import (
	"archive/tar"
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/errdefs"
)

// DefaultWorkspace is where acp-runner clones the repository inside the
// container (its AIMI_WORKSPACE default).
const DefaultWorkspace = "/workspace"

// ContainerFiles is the one Engine API call EngineProbe needs; a
// *client.Client of github.com/docker/docker/client satisfies it.
type ContainerFiles interface {
	CopyFromContainer(ctx context.Context, containerID, srcPath string) (io.ReadCloser, container.PathStat, error)
}

// EngineProbe is a TipProbe reading the branch out of the container's
// workspace clone through the Engine API's archive endpoint, which works on
// stopped containers too (cleanup runs after they exited). It reads the
// loose ref first, then packed-refs; it runs nothing in the container.
type EngineProbe struct {
	Engine    ContainerFiles
	Workspace string // default DefaultWorkspace
}

// maxRefFile bounds what is read of a ref file or packed-refs.
const maxRefFile = 8 << 20

// BranchTip returns the object id refs/heads/<branch> has in the
// container's workspace, or "" when the workspace has no such branch (or no
// repository at all: the runner failed before cloning).
func (p EngineProbe) BranchTip(ctx context.Context, containerName, branch string) (string, error) {
	ws := p.Workspace
	if ws == "" {
		ws = DefaultWorkspace
	}
	ref := "refs/heads/" + branch
	loose, found, err := p.readFile(ctx, containerName, path.Join(ws, ".git", ref))
	if err != nil {
		return "", err
	}
	if found {
		tip := strings.TrimSpace(loose)
		if !validOID(tip) {
			return "", fmt.Errorf("container %s: %s in the workspace holds %q, not an object id", containerName, ref, clip(tip))
		}
		return tip, nil
	}
	packed, found, err := p.readFile(ctx, containerName, path.Join(ws, ".git", "packed-refs"))
	if err != nil || !found {
		return "", err
	}
	return packedRef(packed, ref), nil
}

// packedRef finds ref in the content of a packed-refs file ("" when it is
// not there). The file comes from inside a container: lines that are not
// "<oid> <ref>" (the header, peeled "^<oid>" lines, garbage) are skipped.
func packedRef(packed, ref string) string {
	sc := bufio.NewScanner(strings.NewReader(packed))
	sc.Buffer(make([]byte, 0, 4096), maxRefFile)
	for sc.Scan() {
		oid, name, ok := strings.Cut(sc.Text(), " ")
		if ok && name == ref && validOID(oid) {
			return oid
		}
	}
	return ""
}

// readFile returns the content of one regular file in the container;
// found is false when it does not exist.
func (p EngineProbe) readFile(ctx context.Context, containerName, file string) (string, bool, error) {
	rc, _, err := p.Engine.CopyFromContainer(ctx, containerName, file)
	if errdefs.IsNotFound(err) {
		// The engine says not found for a missing path and for a missing
		// container alike; a missing container is the caller's business
		// (it inspected it before asking).
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("read %s from container %s: %w", file, containerName, err)
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return "", false, nil
		}
		if err != nil {
			return "", false, fmt.Errorf("read %s from container %s: %w", file, containerName, err)
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		data, err := io.ReadAll(io.LimitReader(tr, maxRefFile+1))
		if err != nil {
			return "", false, fmt.Errorf("read %s from container %s: %w", file, containerName, err)
		}
		if len(data) > maxRefFile {
			// Reading part of it could miss the branch and call the
			// container's work absent: refuse to guess.
			return "", false, fmt.Errorf("read %s from container %s: larger than %d bytes", file, containerName, maxRefFile)
		}
		return string(data), true, nil
	}
}
