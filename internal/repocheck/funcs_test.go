package repocheck

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// maxFuncLines is the most lines a function of a non-test Go file may span,
// from its func keyword to its closing brace: a function past it does more
// than one job and wants splitting.
const maxFuncLines = 80

// longFuncs are the functions that were over maxFuncLines when the rule came
// and are being split. This list may only shrink: never add to it (split the
// function instead). The test fails when one of them is back under the limit,
// so that it leaves the list with the change that split it.
var longFuncs = map[string]bool{}

// funcName is how longFuncs names a function: Type.Method for a method.
func funcName(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return fd.Name.Name
	}
	t := fd.Recv.List[0].Type
	if s, ok := t.(*ast.StarExpr); ok {
		t = s.X
	}
	switch x := t.(type) {
	case *ast.IndexExpr: // generic receiver
		t = x.X
	case *ast.IndexListExpr:
		t = x.X
	}
	if id, ok := t.(*ast.Ident); ok {
		return id.Name + "." + fd.Name.Name
	}
	return fd.Name.Name
}

func TestNoFunctionOverTheLimit(t *testing.T) {
	root := filepath.Join("..", "..")
	seen := map[string]int{}
	goFiles(t, func(path string, data []byte) {
		rel, err := filepath.Rel(root, path)
		if err != nil {
			t.Fatal(err)
		}
		rel = filepath.ToSlash(rel)
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, data, parser.SkipObjectResolution)
		if err != nil {
			t.Errorf("parse %s: %v", rel, err)
			return
		}
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			n := fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1
			key := rel + " " + funcName(fd)
			seen[key] = n
			if n > maxFuncLines && !longFuncs[key] {
				t.Errorf("%s: %s has %d lines, more than %d: split it by what its parts do", rel, funcName(fd), n, maxFuncLines)
			}
		}
	})
	for key := range longFuncs {
		n, ok := seen[key]
		switch {
		case !ok:
			t.Errorf("%s is in longFuncs but no longer exists: remove it from the list", key)
		case n <= maxFuncLines:
			t.Errorf("%s has %d lines now, within the limit of %d: remove it from longFuncs", key, n, maxFuncLines)
		}
	}
}

// The receiver spelling of funcName must match what longFuncs says, or a
// listed method would never be found.
func TestFuncNameSpellsReceivers(t *testing.T) {
	src := "package p\nfunc F() {}\nfunc (m *M) A() {}\nfunc (m M) B() {}\nfunc (g *G[T]) C() {}\nfunc (g G[K, V]) D() {}\n"
	f, err := parser.ParseFile(token.NewFileSet(), "p.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range f.Decls {
		got = append(got, funcName(d.(*ast.FuncDecl)))
	}
	if want := "F M.A M.B G.C G.D"; strings.Join(got, " ") != want {
		t.Errorf("funcName = %q, want %q", strings.Join(got, " "), want)
	}
}
