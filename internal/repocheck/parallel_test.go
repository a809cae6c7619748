package repocheck

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// notParallel starts the doc comment line that says why an end-to-end test
// of cmd/aimid runs alone (CONTRIBUTING.md: go test runs it first, before
// the parallel ones).
const notParallel = "Not parallel:"

// serialTests are the Test functions of src (a cmd/aimid test file) that
// neither call parallel(t) or parallelLong(t) nor say why not in their doc
// comment.
func serialTests(t *testing.T, name string, src []byte) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), name, src, parser.ParseComments|parser.SkipObjectResolution)
	if err != nil {
		t.Fatalf("parse %s: %v", name, err)
	}
	var out []string
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok || fd.Recv != nil || fd.Body == nil || !strings.HasPrefix(fd.Name.Name, "Test") || fd.Name.Name == "TestMain" {
			continue
		}
		if callsParallel(fd.Body) || fd.Doc != nil && strings.Contains(fd.Doc.Text(), notParallel) {
			continue
		}
		out = append(out, fd.Name.Name)
	}
	return out
}

// parallelCalls are cmd/aimid's helpers that run a test in one of its
// slots (shared_test.go).
var parallelCalls = map[string]bool{"parallel": true, "parallelLong": true, "parallelCluster": true, "parallelClusterAlone": true}

// callsParallel reports whether body calls one of parallelCalls as a
// statement of its own.
func callsParallel(body *ast.BlockStmt) bool {
	found := false
	ast.Inspect(body, func(n ast.Node) bool {
		if es, ok := n.(*ast.ExprStmt); ok {
			if call, ok := es.X.(*ast.CallExpr); ok {
				if id, ok := call.Fun.(*ast.Ident); ok && parallelCalls[id.Name] {
					found = true
				}
			}
		}
		return !found
	})
	return found
}

// Every end-to-end test in cmd/aimid runs in parallel with the others
// (parallel or parallelLong), or says in its doc comment why it cannot
// ("Not parallel: ..."): a test left serial by mistake runs alone before
// the rest and lengthens the whole package's run by its own time.
func TestAimidTestsRunInParallelOrSayWhyNot(t *testing.T) {
	dir := filepath.Join("..", "..", "cmd", "aimid")
	files, err := filepath.Glob(filepath.Join(dir, "*_test.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no test files in %s: %v", dir, err)
	}
	for _, path := range files {
		src, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range serialTests(t, path, src) {
			t.Errorf("%s: %s neither calls parallel(t) (or parallelLong, parallelCluster, parallelClusterAlone) nor says why not in a %q line of its doc comment", filepath.Base(path), name, notParallel)
		}
	}
}

// The check itself: a test that calls neither and has no reason is found;
// a call after a skip, a reason, TestMain and a helper pass.
func TestSerialTestsAreFound(t *testing.T) {
	src := `package p
func TestA(t *testing.T) { parallel(t) }
func TestB(t *testing.T) {
	if testing.Short() {
		t.Skip()
	}
	parallelLong(t)
}
// TestC runs alone.
//
// Not parallel: its bound is the claim.
func TestC(t *testing.T) {}
// TestD forgot.
func TestD(t *testing.T) { _ = parallel }
func TestE(t *testing.T) {}
func TestMain(m *testing.M) {}
func helper(t *testing.T) {}
`
	if got, want := serialTests(t, "p_test.go", []byte(src)), []string{"TestD", "TestE"}; !slices.Equal(got, want) {
		t.Errorf("serialTests = %v, want %v", got, want)
	}
}
