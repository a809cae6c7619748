package runner

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aimi-tools/swarm/contract"
)

func TestLoadSecretEnv(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "AIMI_GIT_TOKEN"), []byte("tok=en\nwith newline"), 0o400); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "API_KEY"), []byte("k"), 0o400); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, list string
		want       map[string]string
		errHas     string
	}{
		{"nothing listed sets nothing", "", map[string]string{}, ""},
		{"every listed file becomes its variable, bytes as they are", "AIMI_GIT_TOKEN,API_KEY", map[string]string{"AIMI_GIT_TOKEN": "tok=en\nwith newline", "API_KEY": "k"}, ""},
		{"a missing file names the variable", "MISSING", nil, "MISSING"},
		{"a path is not a name", "../etc/passwd", nil, "not an environment variable name"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := map[string]string{}
			err := LoadSecretEnv(func(k string) string {
				if k == contract.EnvSecretEnv {
					return c.list
				}
				return ""
			}, func(k, v string) error { got[k] = v; return nil }, dir)
			if c.errHas != "" {
				if err == nil || !strings.Contains(err.Error(), c.errHas) {
					t.Fatalf("err = %v, want one naming %q", err, c.errHas)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(c.want) {
				t.Fatalf("got %v", got)
			}
			for k, v := range c.want {
				if got[k] != v {
					t.Fatalf("%s = %q, want %q", k, got[k], v)
				}
			}
		})
	}
}

func TestRequestInput(t *testing.T) {
	p := filepath.Join(t.TempDir(), "req")
	if err := os.WriteFile(p, []byte("from file\n"), 0o444); err != nil {
		t.Fatal(err)
	}
	read := func(env string) string {
		rc, err := RequestInput(func(k string) string {
			if k == contract.EnvTaskRequestFile {
				return env
			}
			return ""
		}, strings.NewReader("from stdin\n"))
		if err != nil {
			t.Fatal(err)
		}
		defer rc.Close()
		b, _ := io.ReadAll(rc)
		return string(b)
	}
	if got := read(""); got != "from stdin\n" {
		t.Errorf("without %s: %q", contract.EnvTaskRequestFile, got)
	}
	if got := read(p); got != "from file\n" {
		t.Errorf("with %s: %q", contract.EnvTaskRequestFile, got)
	}
}
