package workspace_test

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/internal/dockertest"
	"github.com/aimi-tools/swarm/workspace"
)

// TestPrepareKeepsTheImageWhileTheTipMovedLittle: a Prepare whose
// difference from the image's commit is under the thresholds keeps the
// image (no tree made, Ready not told again); past RebuildPaths, or a tip
// that does not descend from the commit, the image is rebuilt.
func TestPrepareKeepsTheImageWhileTheTipMovedLittle(t *testing.T) {
	base, _, d, run := onEngine(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	tarball, tip := project(t)
	ready := 0
	m := workspace.New(d, workspace.Options{Labels: map[string]string{dockertest.LabelKey: run, contract.LabelDaemon: "cow-" + run}, Ready: func(string, string) { ready++ }})
	trees := 0
	prepare := func(commit string, diff workspace.Diff) {
		t.Helper()
		m.Prepare("/repo/k", base, func(context.Context) (workspace.Tree, error) {
			trees++
			return workspace.Tree{Commit: commit, Tar: io.NopCloser(bytes.NewReader(tarball))}, nil
		}, func(_ context.Context, from string) (workspace.Diff, error) {
			diff.Tip = commit
			return diff, nil
		})
		m.Wait()
	}
	prepare(tip, workspace.Diff{})
	first, _, ok := m.Image(ctx, "/repo/k", base)
	if !ok || trees != 1 || ready != 1 {
		t.Fatalf("first build: image %q (%t), %d trees, %d readies", first, ok, trees, ready)
	}
	moved := strings.Repeat("1", 40)
	prepare(moved, workspace.Diff{Descends: true, Paths: workspace.RebuildPaths, Bytes: workspace.RebuildBytes})
	if img, commit, _ := m.Image(ctx, "/repo/k", base); img != first || commit != tip || trees != 1 || ready != 1 {
		t.Errorf("under the thresholds: image %s at %s, %d trees, %d readies; want %s kept at %s", img, commit, trees, ready, first, tip)
	}
	prepare(moved, workspace.Diff{Descends: false, Paths: 1})
	if _, commit, _ := m.Image(ctx, "/repo/k", base); commit != moved || trees != 2 || ready != 2 {
		t.Errorf("a tip not descending: image at %s, %d trees, %d readies; want a new image at %s", commit, trees, ready, moved)
	}
	far := strings.Repeat("2", 40)
	prepare(far, workspace.Diff{Descends: true, Paths: workspace.RebuildPaths + 1})
	if _, commit, _ := m.Image(ctx, "/repo/k", base); commit != far || trees != 3 || ready != 3 {
		t.Errorf("past RebuildPaths: image at %s, %d trees, %d readies; want a new image at %s", commit, trees, ready, far)
	}
}
