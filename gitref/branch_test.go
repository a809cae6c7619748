package gitref

import (
	"encoding/json"
	"errors"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/aimi-tools/swarm/spec"
)

func TestCheckBranchNamesTheRuleBroken(t *testing.T) {
	for _, tc := range []struct {
		name, rule string // rule: a substring of the message; "" means valid
	}{
		{"feat/add-task-status", ""},
		{"main", ""},
		{"a/b_c-d/9", ""},
		{"", "is empty"},
		{"HEAD", `"HEAD"`},
		{"-x", "starts with '-'"},
		{"a//b", "empty component"},
		{"a/", "empty component"},
		{"/a", "empty component"},
		{"a..b", `".."`},
		{"a.lock", `".lock"`},
		{"a/.b", "starts with '.'"},
		{"a.", "ends with '.'"},
		{"a@{b", `"@{"`},
		{"a b", "' '"},
		{"a~b", "'~'"},
		{"a^b", "'^'"},
		{"a:b", "':'"},
		{"a?b", "'?'"},
		{"a*b", "'*'"},
		{"a[b", "'['"},
		{`a\b`, `'\'`},
		{"a\x01b", "control character"},
		{"a\x7fb", "control character"},
		{strings.Repeat("a", 300), "300 bytes long"},
		{strings.Repeat("a", MaxBranchBytes), ""},
		{"_a", "start with a letter or a digit"},
		{"a.b", "contains '.'"},
		{"a@b", "contains '@'"},
		{"aé", "byte 0xc3"},
	} {
		err := CheckBranch(tc.name)
		if tc.rule == "" {
			if err != nil {
				t.Errorf("CheckBranch(%q) = %v, want valid", tc.name, err)
			}
			continue
		}
		var e *Error
		if !errors.As(err, &e) || !strings.Contains(err.Error(), tc.rule) {
			t.Errorf("CheckBranch(%q) = %v, want the rule %q", tc.name, err, tc.rule)
		}
		if len(err.Error()) > 300 {
			t.Errorf("CheckBranch(%q): message of %d bytes", tc.name, len(err.Error()))
		}
	}
}

// checkRefFormat asks git itself.
func checkRefFormat(t *testing.T, git, refname string) bool {
	t.Helper()
	cmd := exec.Command(git, "check-ref-format", refname)
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL="+os.DevNull)
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("run git: %v", err)
	}
	return err == nil
}

// TestRulesAgreeWithGit compares CheckRefFormat with git check-ref-format on
// the fuzz seeds and on random names over an alphabet of every character git
// treats specially, and checks that CheckBranch accepts nothing git refuses.
func TestRulesAgreeWithGit(t *testing.T) {
	git, err := exec.LookPath("git")
	if err != nil {
		t.Fatal("git is needed to cross-check the ref-name rules: install git")
	}
	names := seedNames(t)
	rng := rand.New(rand.NewPCG(1, 2))
	const alphabet = "ab/.-_@{}~^:?*[\\ \t\x7fé1"
	for range 400 {
		var b strings.Builder
		for range 1 + rng.IntN(8) {
			b.WriteByte(alphabet[rng.IntN(len(alphabet))])
		}
		names = append(names, b.String())
	}
	for _, n := range names {
		if strings.ContainsRune(n, 0) {
			continue // cannot be an argument
		}
		ref := "refs/heads/" + n
		ours, theirs := CheckRefFormat(ref) == nil, checkRefFormat(t, git, ref)
		if ours != theirs {
			t.Errorf("%q: CheckRefFormat accepts=%v, git accepts=%v (%v)", ref, ours, theirs, CheckRefFormat(ref))
		}
		if ValidBranch(n) && !theirs {
			t.Errorf("CheckBranch accepts %q, which git refuses", n)
		}
	}
}

func seedNames(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "fuzz", "FuzzCheckBranch", "*"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no seed corpus: %v", err)
	}
	var out []string
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		// go test fuzz v1 / string("...")
		m := regexp.MustCompile(`(?m)^string\((".*")\)$`).FindStringSubmatch(string(data))
		if m == nil {
			t.Fatalf("%s: not a string seed", f)
		}
		s, err := unquote(m[1])
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		out = append(out, s)
	}
	return out
}

// TestSpecSchemaHasThePattern: the state file's JSON Schema (which other
// tools read) states the same character set as Pattern.
func TestSpecSchemaHasThePattern(t *testing.T) {
	var doc struct {
		Definitions struct {
			Container struct {
				Properties struct {
					BranchName struct {
						Pattern string `json:"pattern"`
					} `json:"branchName"`
				} `json:"properties"`
			} `json:"container"`
		} `json:"definitions"`
	}
	if err := json.Unmarshal(spec.StateSchema(), &doc); err != nil {
		t.Fatal(err)
	}
	if got := doc.Definitions.Container.Properties.BranchName.Pattern; got != Pattern {
		t.Errorf("schema branchName pattern %q, Pattern %q", got, Pattern)
	}
}
