package gitserve

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/errdefs"
)

// fakeFiles serves files of one container as the archive endpoint does.
type fakeFiles map[string]string

func (f fakeFiles) CopyFromContainer(_ context.Context, _ string, p string) (io.ReadCloser, container.PathStat, error) {
	content, ok := f[p]
	if !ok {
		return nil, container.PathStat{}, errdefs.NotFound(errors.New("no such file"))
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	tw.WriteHeader(&tar.Header{Name: p[strings.LastIndex(p, "/")+1:], Mode: 0o644, Size: int64(len(content)), Typeflag: tar.TypeReg})
	tw.Write([]byte(content))
	tw.Close()
	return io.NopCloser(&buf), container.PathStat{}, nil
}

func TestEngineProbe(t *testing.T) {
	packed := "# pack-refs with: peeled fully-peeled sorted \n" + oidA + " refs/heads/feat\n^" + oidB + "\n" + oidB + " refs/heads/other\n"
	tests := []struct {
		name    string
		files   fakeFiles
		branch  string
		want    string
		wantErr bool
	}{
		{"loose ref", fakeFiles{"/workspace/.git/refs/heads/feat/x": oidA + "\n"}, "feat/x", oidA, false},
		{"loose ref wins over packed", fakeFiles{"/workspace/.git/refs/heads/feat": oidB + "\n", "/workspace/.git/packed-refs": packed}, "feat", oidB, false},
		{"packed ref", fakeFiles{"/workspace/.git/packed-refs": packed}, "other", oidB, false},
		{"no such branch", fakeFiles{"/workspace/.git/packed-refs": packed}, "nope", "", false},
		{"no repository at all", fakeFiles{}, "feat", "", false},
		{"garbage loose ref", fakeFiles{"/workspace/.git/refs/heads/feat": "ref: refs/heads/x\n"}, "feat", "", true},
		{"oversized packed-refs", fakeFiles{"/workspace/.git/packed-refs": strings.Repeat("x", maxRefFile+1)}, "feat", "", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := EngineProbe{Engine: tc.files}.BranchTip(t.Context(), "aimi-x", tc.branch)
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Fatalf("BranchTip = %q, %v; want %q (error %v)", got, err, tc.want, tc.wantErr)
			}
		})
	}
}

func FuzzPackedRef(f *testing.F) {
	f.Add("# pack-refs with: peeled\n"+oidA+" refs/heads/feat\n^"+oidB+"\n", "refs/heads/feat")
	f.Add(oidA+" refs/heads/a b\n", "refs/heads/a b")
	f.Add("", "refs/heads/x")
	f.Fuzz(func(t *testing.T, packed, ref string) {
		got := packedRef(packed, ref)
		if got != "" && (!validOID(got) || !strings.Contains(packed, got+" "+ref)) {
			t.Fatalf("packedRef = %q, not an id of %q in the input", got, ref)
		}
	})
}
