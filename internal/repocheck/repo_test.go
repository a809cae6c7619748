package repocheck

import (
	"bytes"
	"go/scanner"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// maxLines is the most lines a non-test Go file may have: a file past it
// holds more than one thing and wants splitting.
const maxLines = 600

// goFiles calls fn for every Go file of the repository but tests.
func goFiles(t *testing.T, fn func(path string, data []byte)) {
	t.Helper()
	root := filepath.Join("..", "..")
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		fn(path, data)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestNoFileOverTheLimit(t *testing.T) {
	goFiles(t, func(path string, data []byte) {
		if n := bytes.Count(data, []byte("\n")); n > maxLines {
			t.Errorf("%s has %d lines, more than %d: split it by what its parts do", path, n, maxLines)
		}
	})
}

func TestNoGoto(t *testing.T) {
	goFiles(t, func(path string, data []byte) {
		fset := token.NewFileSet()
		var sc scanner.Scanner
		sc.Init(fset.AddFile(path, -1, len(data)), data, nil, 0)
		for {
			_, tok, _ := sc.Scan()
			if tok == token.EOF {
				return
			}
			if tok == token.GOTO {
				t.Errorf("%s uses goto: write the loop or the function that says what it does", path)
				return
			}
		}
	})
}
