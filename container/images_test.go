package container

import (
	"archive/tar"
	"bytes"
	"io"
	"testing"
)

// TestOwnedTarLeavesReadOnlyFilesToRoot: an image's tree goes to the
// sandbox's user, but for files no one may write (git's packs, objects
// and a split index's shared part), which stay root's so that git's
// freshening of their times fails instead of copying each into every
// sandbox's writable layer.
func TestOwnedTarLeavesReadOnlyFilesToRoot(t *testing.T) {
	var in bytes.Buffer
	tw := tar.NewWriter(&in)
	for _, e := range []struct {
		name string
		typ  byte
		mode int64
	}{
		{"workspace/", tar.TypeDir, 0o755},
		{"workspace/a.txt", tar.TypeReg, 0o644},
		{"workspace/.git/sharedindex.0123", tar.TypeReg, 0o444},
		{"workspace/.git/objects/pack/pack-1.pack", tar.TypeReg, 0o444},
		{"workspace/run.sh", tar.TypeReg, 0o755},
		{"workspace/ro-dir/", tar.TypeDir, 0o555},
	} {
		if err := tw.WriteHeader(&tar.Header{Name: e.name, Typeflag: e.typ, Mode: e.mode, Uid: 7, Gid: 7, Uname: "x"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(ownedTar(&in, 1000, 1001))
	want := map[string]int{"workspace/": 1000, "workspace/a.txt": 1000, "workspace/.git/sharedindex.0123": 0,
		"workspace/.git/objects/pack/pack-1.pack": 0, "workspace/run.sh": 1000, "workspace/ro-dir/": 1000}
	n := 0
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		n++
		if h.Uid != want[h.Name] || h.Uname != "" {
			t.Errorf("%s owned by %d (%q), want %d", h.Name, h.Uid, h.Uname, want[h.Name])
		}
		if h.Uid == 1000 && h.Gid != 1001 {
			t.Errorf("%s group %d, want 1001", h.Name, h.Gid)
		}
	}
	if n != len(want) {
		t.Errorf("%d entries, want %d", n, len(want))
	}
}
