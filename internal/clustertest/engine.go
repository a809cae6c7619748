package clustertest

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/docker/docker/api/types/mount"
)

// Runtime is an OCI runtime registered in a node engine's daemon.json.
type Runtime struct {
	Path string   `json:"path"`
	Args []string `json:"runtimeArgs,omitempty"`
}

// EngineOptions configure StartEngine.
type EngineOptions struct {
	// Packages are Debian packages the node image holds besides the
	// engine's (e.g. "runsc"); the image is keyed by its whole package
	// list.
	Packages []string
	// Runtimes are registered in the node engine's daemon.json by name.
	Runtimes map[string]Runtime
	// Binds are host directories bound into the node read-write at the
	// same path, so that bind mounts the node's engine is asked for (a
	// daemon's data directory) name the host's files.
	Binds []string
	// Capabilities the node gets besides SYS_ADMIN and NET_ADMIN (gVisor's
	// ptrace platform needs SYS_PTRACE).
	Capabilities []string
	// Images are host engine image references loaded into the node.
	Images []string
	// Logger for progress; default slog.Default().
	Logger *slog.Logger
}

// nodeConfigFile is the node engine's daemon.json, inside the node (in the
// directory bound at socketDir).
const nodeConfigFile = socketDir + "/daemon.json"

// StartEngine starts one node engine outside any swarm: a Docker engine
// of its own inside a container of the host's, with the configuration
// opts gives it (runtimes the host engine does not have), so a test can
// change an engine's configuration without touching the host's. The
// returned cluster has one node (Nodes[0], its Host the engine's API);
// Close removes it.
func StartEngine(ctx context.Context, opts EngineOptions) (_ *Cluster, err error) {
	c, ref, labels, err := begin(ctx, opts.Logger, opts.Packages)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			err = c.closeAfter(ctx, err)
		}
	}()
	const role = "engine"
	if len(opts.Runtimes) > 0 {
		b, err := json.Marshal(map[string]any{"runtimes": opts.Runtimes})
		if err != nil {
			return nil, fmt.Errorf("node engine configuration: %w", err)
		}
		dir := filepath.Join(c.dir, role)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("make socket dir of the node engine: %w", err)
		}
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(nodeConfigFile)), b, 0o644); err != nil {
			return nil, fmt.Errorf("write the node engine's daemon.json: %w", err)
		}
		c.nodeArgs = append(c.nodeArgs, "--config-file="+nodeConfigFile)
	}
	c.nodeCaps = opts.Capabilities
	for _, b := range opts.Binds {
		if !filepath.IsAbs(b) {
			return nil, fmt.Errorf("bind %q into the node engine: not an absolute path", b)
		}
		c.nodeMounts = append(c.nodeMounts, mount.Mount{Type: mount.TypeBind, Source: b, Target: b})
	}
	node, err := c.startNode(ctx, ref, role, labels)
	if node != nil {
		c.Nodes = []*Node{node}
	}
	if err != nil {
		return nil, err
	}
	c.log.Info("cluster: node engine up", "since-start", time.Since(c.started).Round(time.Millisecond))
	if err := c.loadImages(ctx, opts.Images); err != nil {
		return nil, err
	}
	return c, nil
}
