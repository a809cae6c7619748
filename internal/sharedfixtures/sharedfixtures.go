// Package sharedfixtures locates, for tests, the read-only shared tree that
// sits next to the module root (<module root>/../shared): the fixtures under
// shared/fixtures and the schemas under shared/spec.
package sharedfixtures

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// moduleRoot is the directory of the go.mod above the working directory (a
// test runs in its package's directory).
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("go.mod not found above the test directory")
		}
		dir = parent
	}
}

// Dir returns <module root>/../shared/fixtures, skipping the test when the
// module root or the fixtures are absent.
func Dir(tb testing.TB) string {
	tb.Helper()
	root, err := moduleRoot()
	if err != nil {
		tb.Skipf("module root not found: %v", err)
	}
	fx := filepath.Join(root, "..", "shared", "fixtures")
	if _, err := os.Stat(fx); err != nil {
		tb.Skipf("shared fixtures absent: %v", err)
	}
	return fx
}

// SchemaPath returns the path of the shared swarm-state schema,
// <module root>/../shared/spec/swarm-state.schema.json, failing the test when
// the module root is not found. Whether the file exists is left to the
// caller (one test fails without it, another skips).
func SchemaPath(tb testing.TB) string {
	tb.Helper()
	root, err := moduleRoot()
	if err != nil {
		tb.Fatal(err)
	}
	return filepath.Join(root, "..", "shared", "spec", "swarm-state.schema.json")
}
