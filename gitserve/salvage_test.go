package gitserve

import (
	"archive/tar"
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// gitTar builds a tar stream as the engine returns it for /workspace/.git.
func gitTar(t testing.TB, entries []tar.Header, body map[string]string) []byte {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, h := range entries {
		h.Size = int64(len(body[h.Name]))
		if h.Mode == 0 {
			h.Mode = 0o644
		}
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(body[h.Name])); err != nil {
			t.Fatal(err)
		}
	}
	tw.Close()
	return buf.Bytes()
}

func TestExtractGitDirTakesRefsAndObjectsOnly(t *testing.T) {
	dir := t.TempDir()
	outside := filepath.Join(t.TempDir(), "victim")
	data := gitTar(t, []tar.Header{
		{Name: ".git/", Typeflag: tar.TypeDir},
		{Name: ".git/HEAD", Typeflag: tar.TypeReg},
		{Name: ".git/config", Typeflag: tar.TypeReg},
		{Name: ".git/hooks/post-merge", Typeflag: tar.TypeReg},
		{Name: ".git/refs/heads/feat", Typeflag: tar.TypeReg},
		{Name: ".git/objects/info/alternates", Typeflag: tar.TypeReg},
		{Name: ".git/objects/ab/cdef", Typeflag: tar.TypeReg},
		{Name: ".git/refs/heads/link", Typeflag: tar.TypeSymlink, Linkname: outside},
		{Name: ".git/refs/../../escape", Typeflag: tar.TypeReg},
	}, map[string]string{
		".git/HEAD": "ref: refs/heads/feat\n", ".git/config": "[core]\n\tfsmonitor = /bin/evil\n",
		".git/hooks/post-merge": "#!/bin/sh\n", ".git/refs/heads/feat": "0123\n",
		".git/objects/info/alternates": "/etc\n", ".git/objects/ab/cdef": "blob", ".git/refs/../../escape": "x",
	})
	if err := extractGitDir(bytes.NewReader(data), dir); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"HEAD", "refs/heads/feat", "objects/ab/cdef"} {
		if _, err := os.Stat(filepath.Join(dir, want)); err != nil {
			t.Errorf("%s not extracted: %v", want, err)
		}
	}
	for _, never := range []string{"config", "hooks/post-merge", "objects/info/alternates", "refs/heads/link", "../escape", "escape"} {
		if _, err := os.Lstat(filepath.Join(dir, never)); err == nil {
			t.Errorf("%s was extracted", never)
		}
	}
	if _, err := os.Lstat(outside); err == nil {
		t.Error("a link led outside")
	}
}

func FuzzExtractGitDir(f *testing.F) {
	f.Add(gitTar(f, []tar.Header{{Name: ".git/HEAD", Typeflag: tar.TypeReg}}, map[string]string{".git/HEAD": "ref: refs/heads/x\n"}))
	f.Add([]byte("not a tar"))
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		_ = extractGitDir(bytes.NewReader(data), dir)
		// Whatever the stream, nothing lands outside dir and no link is made.
		_ = filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
			if err == nil && info.Mode()&os.ModeSymlink != 0 {
				t.Errorf("link %s extracted", p)
			}
			return nil
		})
	})
}
