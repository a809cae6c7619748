package workspace_test

import (
	"bytes"
	"context"
	"io"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/container"
	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/engine"
	"github.com/aimi-tools/swarm/internal/dockertest"
	"github.com/aimi-tools/swarm/workspace"
)

// sweepAfterCommit is the engine with a sweep of m run between the
// build's commit and the build's return, as the daemon's periodic sweep
// (Run) or another repository's build may do.
type sweepAfterCommit struct {
	*container.Docker
	m **workspace.Manager
}

func (s sweepAfterCommit) BuildImage(ctx context.Context, b engine.ImageBuild) (string, error) {
	id, err := s.Docker.BuildImage(ctx, b)
	if err == nil {
		(*s.m).Sweep(ctx)
	}
	return id, err
}

// TestASweepDuringABuildLeavesTheNewImage: the image a build just
// committed is no repository's yet; a sweep in that moment must not take
// it, or the pool is told an image that is gone (and fails every create).
func TestASweepDuringABuildLeavesTheNewImage(t *testing.T) {
	base, _, d, run := onEngine(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	tarball, tip := project(t)
	var m *workspace.Manager
	var told []string
	m = workspace.New(sweepAfterCommit{d, &m}, workspace.Options{
		Labels: map[string]string{dockertest.LabelKey: run, contract.LabelDaemon: "cow-" + run},
		Ready:  func(_, image string) { told = append(told, image) }})
	m.Prepare("/repo/s", base, func(context.Context) (workspace.Tree, error) {
		return workspace.Tree{Commit: tip, Tar: io.NopCloser(bytes.NewReader(tarball))}, nil
	}, nil)
	m.Wait()
	if len(told) != 1 {
		t.Fatalf("Ready told %v, want one image", told)
	}
	if id, err := d.ImageID(ctx, told[0]); err != nil || id == "" {
		t.Fatalf("the image Ready was told, %s, is gone (%q, %v)", told[0], id, err)
	}
	if _, _, ok := m.Image(ctx, "/repo/s", base); !ok {
		t.Fatal("no image for the repository after its build")
	}
}
