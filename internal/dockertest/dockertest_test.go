package dockertest

import (
	"archive/tar"
	"bytes"
	"context"
	"io"
	"testing"

	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/errdefs"

	"github.com/aimi-tools/swarm/contract"
)

func TestImageNameIsAValidRepositoryComponent(t *testing.T) {
	tests := []struct{ in, want string }{
		{"TestEngine", "testengine"},
		{"TestEngine/engine/50_containers at once", "testengine-engine-50-containers-at-once"},
		{"///", "image"},
		{"TestAVeryLongNameThatGoesOnAndOnAndOnAndOnAndOnAndOnAndOnAndOnForever", "testaverylongnamethatgoesonandonandonandonandonandonandonand"},
	}
	for _, tt := range tests {
		if got := imageName(tt.in); got != tt.want {
			t.Errorf("imageName(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestTarOfHoldsEveryFileExecutable(t *testing.T) {
	b, err := tarOf(map[string][]byte{"Dockerfile": []byte("FROM scratch\n"), "bin0": []byte("ELF")})
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(bytes.NewReader(b))
	got := map[string]string{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(tr)
		got[h.Name] = string(body)
		if h.Mode&0o111 == 0 {
			t.Errorf("%s not executable", h.Name)
		}
	}
	if got["Dockerfile"] != "FROM scratch\n" || got["bin0"] != "ELF" || len(got) != 2 {
		t.Fatalf("tar holds %v", got)
	}
}

func TestCleanupByLabelWithNothingLabelledSucceeds(t *testing.T) {
	Client(t) // fails without an engine, skips with AIMI_SKIP_DOCKER=1
	if err := CleanupByLabel(context.Background(), LabelKey, "nothing-"+RunID()); err != nil {
		t.Fatal(err)
	}
}

// A daemon's workspace image inherits the run label from the test's sandbox
// image it was committed over; another test's cleanup by that run label
// must leave it to the daemon's own cleanup, or it removes an image a
// running daemon is about to create sandboxes from.
func TestCleanupByRunLabelLeavesADaemonsWorkspaceImage(t *testing.T) {
	cli := Client(t)
	ctx := context.Background()
	run, inst := "wsimg-"+RunID(), "wsimg-inst-"+RunID()
	tag := "aimi-test/wsimg:" + RunID()
	tarball, err := tarOf(map[string][]byte{"Dockerfile": []byte("FROM scratch\nCOPY f /f\n"), "f": []byte("x")})
	if err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{LabelKey: run, contract.LabelWorkspace: "true", contract.LabelDaemon: inst}
	if err := buildImage(ctx, cli, tarball, tag, labels); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = cli.ImageRemove(context.Background(), tag, image.RemoveOptions{Force: true}) })
	if err := CleanupByLabel(ctx, LabelKey, run); err != nil {
		t.Fatal(err)
	}
	if _, _, err := cli.ImageInspectWithRaw(ctx, tag); err != nil {
		t.Fatalf("the run label's cleanup removed a daemon's workspace image: %v", err)
	}
	if err := CleanupByLabel(ctx, contract.LabelDaemon, inst); err != nil {
		t.Fatal(err)
	}
	if _, _, err := cli.ImageInspectWithRaw(ctx, tag); !errdefs.IsNotFound(err) {
		t.Fatalf("the daemon label's cleanup left its workspace image: %v", err)
	}
}
