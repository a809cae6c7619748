package spec

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRepositoryStandsAlone fails when any file of the repository names a
// place outside it: the documents beside the checkout on the project's own
// machines do not exist on a user's clone, so a test, script or doc that
// reads them works only there.
func TestRepositoryStandsAlone(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	// Built by concatenation so this file does not match itself.
	outside := []string{".." + "/shared", "shared" + "/spec", "shared" + "/fixtures", "seeds" + "/0", "shared" + "/notes"}
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", ".demo", "bin", "node_modules":
				return filepath.SkipDir
			}
			return nil
		}
		info, err := d.Info()
		if err != nil || !info.Mode().IsRegular() || info.Size() > 4<<20 {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if bytes.IndexByte(b, 0) >= 0 {
			return nil // binary
		}
		for _, s := range outside {
			if i := bytes.Index(b, []byte(s)); i >= 0 {
				line := 1 + bytes.Count(b[:i], []byte("\n"))
				rel, _ := filepath.Rel(root, p)
				t.Errorf("%s:%d names %q, a path outside the repository", rel, line, strings.TrimSpace(s))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
