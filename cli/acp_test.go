package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aimi-tools/swarm/internal/fixtures"
)

func runCLI(t *testing.T, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = Run(context.Background(), args, Streams{In: strings.NewReader(stdin), Out: &out, Err: &errb})
	return code, out.String(), errb.String()
}

const (
	validLine   = `{"type":"progress-update","timestamp":"2026-03-01T10:00:00Z","swarmId":"a1b2c3d4-e5f6-4a7b-8c9d-0e1f2a3b4c5d","containerId":"c1","payload":{"storyId":"US-001","status":"completed","output":"done"}}`
	invalidLine = `{"type":"progress-update","timestamp":"2026-03-01T10:00:00Z","swarmId":"a1b2c3d4-e5f6-4a7b-8c9d-0e1f2a3b4c5d","containerId":"c1","payload":{"storyId":"us-1","status":"completed","output":"done"}}`
)

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestACPValidateExitCodes(t *testing.T) {
	good := writeFile(t, "good.ndjson", validLine+"\n"+validLine+"\n")
	bad := writeFile(t, "bad.ndjson", validLine+"\n"+invalidLine+"\n")
	cases := []struct {
		name     string
		stdin    string
		args     []string
		want     int
		wantOut  string
		wantErrs string
	}{
		{"all valid lines exit 0", "", []string{"acp", "validate", good}, ExitOK, "2 lines, 2 valid, 0 invalid", ""},
		{"an invalid line exits 1 and names field and line", "", []string{"acp", "validate", bad}, ExitInvalid, ":2: progress-update: payload.storyId: must match", ""},
		{"stdin is read when no file is given", validLine + "\n", []string{"acp", "validate"}, ExitOK, "<stdin>: 1 lines, 1 valid", ""},
		{"dash reads stdin", invalidLine, []string{"acp", "validate", "-"}, ExitInvalid, "<stdin>:1:", ""},
		{"empty input is valid", "", []string{"acp", "validate"}, ExitOK, "0 lines", ""},
		{"missing file exits 2", "", []string{"acp", "validate", good, filepath.Join(t.TempDir(), "nope")}, ExitUsage, "2 lines", "no such file"},
		{"unknown flag exits 2", "", []string{"acp", "validate", "--nope"}, ExitUsage, "", "unknown flag"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errs := runCLI(t, tc.stdin, tc.args...)
			if code != tc.want {
				t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", code, tc.want, out, errs)
			}
			if !strings.Contains(out, tc.wantOut) {
				t.Errorf("stdout lacks %q:\n%s", tc.wantOut, out)
			}
			if !strings.Contains(errs, tc.wantErrs) {
				t.Errorf("stderr lacks %q:\n%s", tc.wantErrs, errs)
			}
		})
	}
}

// The --json output: exactly one object per input line, in order, matching
// the fixture verdicts.
func TestACPValidateJSONMatchesFixtureVerdicts(t *testing.T) {
	fx := fixtures.Dir(t)
	code, out, errs := runCLI(t, "", "acp", "validate", "--json", filepath.Join(fx, "acp", "messages.ndjson"))
	if code != ExitInvalid {
		t.Fatalf("exit %d, want 1; stderr %s", code, errs)
	}
	exp, err := os.ReadFile(filepath.Join(fx, "acp", "messages.expect.ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	wantLines := strings.Split(strings.TrimSpace(string(exp)), "\n")
	gotLines := strings.Split(strings.TrimSpace(out), "\n")
	if len(gotLines) != len(wantLines) {
		t.Fatalf("%d output lines for %d input lines", len(gotLines), len(wantLines))
	}
	for i, g := range gotLines {
		var rep struct {
			Line   *int    `json:"line"`
			Valid  *bool   `json:"valid"`
			Type   *string `json:"type"`
			Errors []struct {
				Field   *string `json:"field"`
				Message string  `json:"message"`
			} `json:"errors"`
		}
		dec := json.NewDecoder(strings.NewReader(g))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&rep); err != nil {
			t.Fatalf("line %d: %v: %s", i+1, err, g)
		}
		var want struct {
			Name  string
			Valid bool
		}
		_ = json.Unmarshal([]byte(wantLines[i]), &want)
		if rep.Line == nil || *rep.Line != i+1 || rep.Valid == nil || *rep.Valid != want.Valid || rep.Type == nil || rep.Errors == nil {
			t.Fatalf("line %d (%s): %s", i+1, want.Name, g)
		}
		if want.Valid != (len(rep.Errors) == 0) {
			t.Errorf("line %d (%s): valid=%v with errors %v", i+1, want.Name, want.Valid, rep.Errors)
		}
		for _, e := range rep.Errors {
			if e.Field == nil || e.Message == "" {
				t.Errorf("line %d: error without field or message: %s", i+1, g)
			}
		}
	}
	if !strings.HasPrefix(gotLines[0], `{"line":1,"valid":true,"type":"task-request","errors":[]}`) {
		t.Errorf("first line: %s", gotLines[0])
	}
}
