package gitserve

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/aimi-tools/swarm/gitref"
)

// fakeFiles serves files of one container as *container.Docker does.
type fakeFiles map[string]string

func (f fakeFiles) ReadFile(_ context.Context, _, p string, max int64) ([]byte, bool, error) {
	content, ok := f[p]
	if !ok {
		return nil, false, nil
	}
	if int64(len(content)) > max {
		return nil, false, errors.New("too large")
	}
	return []byte(content), true, nil
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
		{"no such branch, HEAD on another", fakeFiles{"/workspace/.git/packed-refs": packed, "/workspace/.git/HEAD": "ref: refs/heads/other\n"}, "nope", oidB, false},
		{"no such branch, detached HEAD", fakeFiles{"/workspace/.git/HEAD": oidA + "\n"}, "nope", oidA, false},
		{"no such branch, HEAD on a ref nobody can read", fakeFiles{"/workspace/.git/HEAD": "ref: refs/heads/.invalid\n"}, "nope", "", true},
		{"no such branch, garbage HEAD", fakeFiles{"/workspace/.git/HEAD": "what\n"}, "nope", "", true},
		{"no such branch, no HEAD", fakeFiles{"/workspace/.git/packed-refs": packed}, "nope", "", false},
		{"no repository at all", fakeFiles{}, "feat", "", false},
		{"garbage loose ref", fakeFiles{"/workspace/.git/refs/heads/feat": "ref: refs/heads/x\n"}, "feat", "", true},
		{"oversized packed-refs", fakeFiles{"/workspace/.git/packed-refs": strings.Repeat("x", maxRefFile+1)}, "feat", "", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := EngineProbe{Files: tc.files}.BranchTip(t.Context(), "aimi-x", tc.branch)
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
		if got != "" && (!gitref.ValidOID(got) || !strings.Contains(packed, got+" "+ref)) {
			t.Fatalf("packedRef = %q, not an id of %q in the input", got, ref)
		}
	})
}
