package contract

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// stringLits returns the string literals of a Go file with their positions.
func stringLits(t *testing.T, fset *token.FileSet, path string) map[string][]token.Position {
	t.Helper()
	f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	lits := map[string][]token.Position{}
	ast.Inspect(f, func(n ast.Node) bool {
		if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
			if v, err := strconv.Unquote(lit.Value); err == nil {
				lits[v] = append(lits[v], fset.Position(lit.Pos()))
			}
		}
		return true
	})
	return lits
}

// TestDefinedOnce: no other package spells a label key or an environment
// name of this package; they import it.
func TestDefinedOnce(t *testing.T) {
	fset := token.NewFileSet()
	mine := map[string]bool{}
	for _, name := range []string{"labels.go", "env.go"} {
		for v := range stringLits(t, fset, name) {
			if strings.HasPrefix(v, "org.aimi.") || strings.HasPrefix(v, "AIMI_") || strings.HasPrefix(v, "GIT_") {
				mine[v] = true
			}
		}
	}
	if len(mine) < 20 {
		t.Fatalf("found %d names in the package, want its labels and env names", len(mine))
	}
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != ".." && (strings.HasPrefix(name, ".") || name == "testdata" || path == filepath.Join("..", "contract")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		for v, at := range stringLits(t, fset, path) {
			if mine[v] {
				t.Errorf("%s spells %q: use package contract's constant", at[0], v)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
