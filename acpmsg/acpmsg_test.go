package acpmsg

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/aimi-tools/swarm/internal/fixtures"
)

const testSwarmID = "a1b2c3d4-e5f6-4a7b-8c9d-0e1f2a3b4c5d"

func TestFixtureMessagesMatchExpectedVerdicts(t *testing.T) {
	fx := fixtures.Dir(t)
	in, err := os.Open(filepath.Join(fx, "acp", "messages.ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	exp, err := os.ReadFile(filepath.Join(fx, "acp", "messages.expect.ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	type verdict struct {
		Name  string `json:"name"`
		Valid bool   `json:"valid"`
	}
	var want []verdict
	sc := bufio.NewScanner(bytes.NewReader(exp))
	for sc.Scan() {
		var v verdict
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			t.Fatal(err)
		}
		want = append(want, v)
	}
	r := NewReader(in)
	n := 0
	for {
		l, err := r.Next()
		if err != nil {
			break
		}
		n++
		if l.Number > len(want) {
			t.Fatalf("line %d has no expected verdict", l.Number)
		}
		w := want[l.Number-1]
		if got := l.Err == nil; got != w.Valid {
			t.Errorf("line %d (%s): valid=%v, want %v (err: %v)", l.Number, w.Name, got, w.Valid, l.Err)
		}
	}
	if n != len(want) {
		t.Errorf("read %d lines, expected verdicts for %d", n, len(want))
	}
}

// base returns a valid message of type t as a generic map for mutation.
func base(t Type) map[string]any {
	m := map[string]any{
		"type":        string(t),
		"timestamp":   "2026-03-01T10:00:00Z",
		"swarmId":     testSwarmID,
		"containerId": "abc123def456",
	}
	switch t {
	case TypeTaskRequest:
		m["payload"] = map[string]any{"taskFilePath": ".aimi/tasks/2026-03-01-x-tasks.json", "branchName": "feat/x",
			"repoUrl": "https://github.com/org/repo.git", "envVars": map[string]any{"NODE_ENV": "dev"}}
	case TypeProgressUpdate:
		m["payload"] = map[string]any{"storyId": "US-001", "status": "in_progress", "output": "started"}
	case TypeCompletion:
		m["payload"] = map[string]any{"status": "completed", "prUrl": "https://github.com/org/repo/pull/1", "errors": []any{}}
	case TypeError:
		m["payload"] = map[string]any{"code": "CONTAINER_OOM", "message": "out of memory"}
	}
	return m
}

func strs(n int, s string) []any {
	out := make([]any, n)
	for i := range out {
		out[i] = s
	}
	return out
}

// ruleMut changes a valid message m and its payload p before it is parsed.
type ruleMut func(m, p map[string]any)

// ruleCase is one case of TestParseRules: a valid message of typ changed by
// mut, and the field and rule its parse fails on (empty field: valid).
type ruleCase struct {
	name      string
	typ       Type
	mut       ruleMut
	wantField string // empty: valid
	wantRule  string
}

func TestParseRules(t *testing.T) {
	cases := append(envelopeRuleCases(), payloadRuleCases()...)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { checkParseRule(t, tc) })
	}
}

// envelopeRuleCases are TestParseRules' cases of the four valid messages and
// of the envelope's fields.
func envelopeRuleCases() []ruleCase {
	return []ruleCase{
		{"valid task-request", TypeTaskRequest, nil, "", ""},
		{"valid progress-update", TypeProgressUpdate, nil, "", ""},
		{"valid completion", TypeCompletion, nil, "", ""},
		{"valid error", TypeError, nil, "", ""},
		// envelope
		{"missing type is required", TypeError, func(m, p map[string]any) { delete(m, "type") }, "type", "required"},
		{"unknown type is rejected", TypeError, func(m, p map[string]any) { m["type"] = "heartbeat" }, "type", "msgtype"},
		{"type of wrong JSON kind is a type error", TypeError, func(m, p map[string]any) { m["type"] = 3 }, "type", "type"},
		{"missing timestamp is required", TypeError, func(m, p map[string]any) { delete(m, "timestamp") }, "timestamp", "required"},
		{"timestamp with offset and fraction is valid", TypeError, func(m, p map[string]any) { m["timestamp"] = "2026-03-01T10:00:00.5+02:00" }, "", ""},
		{"timestamp without zone is invalid", TypeError, func(m, p map[string]any) { m["timestamp"] = "2026-03-01T10:00:00" }, "timestamp", "rfc3339"},
		{"date-only timestamp is invalid", TypeError, func(m, p map[string]any) { m["timestamp"] = "2026-03-01" }, "timestamp", "rfc3339"},
		{"missing swarmId is required", TypeError, func(m, p map[string]any) { delete(m, "swarmId") }, "swarmId", "required"},
		{"swarmId UUID v1 is rejected", TypeError, func(m, p map[string]any) { m["swarmId"] = "a1b2c3d4-e5f6-1a7b-8c9d-0e1f2a3b4c5d" }, "swarmId", "uuid4"},
		{"swarmId in braces is rejected", TypeError, func(m, p map[string]any) { m["swarmId"] = "{" + testSwarmID + "}" }, "swarmId", "uuid4"},
		{"swarmId without dashes is rejected", TypeError, func(m, p map[string]any) { m["swarmId"] = strings.ReplaceAll(testSwarmID, "-", "") }, "swarmId", "uuid4"},
		{"swarmId with wrong variant is rejected", TypeError, func(m, p map[string]any) { m["swarmId"] = "a1b2c3d4-e5f6-4a7b-cc9d-0e1f2a3b4c5d" }, "swarmId", "uuid4"},
		{"uppercase swarmId is valid", TypeError, func(m, p map[string]any) { m["swarmId"] = strings.ToUpper(testSwarmID) }, "", ""},
		{"empty containerId is rejected", TypeError, func(m, p map[string]any) { m["containerId"] = "" }, "containerId", "required"},
		{"missing containerId is required", TypeError, func(m, p map[string]any) { delete(m, "containerId") }, "containerId", "required"},
		{"missing payload is required", TypeError, func(m, p map[string]any) { delete(m, "payload") }, "payload", "required"},
		{"null payload is required", TypeError, func(m, p map[string]any) { m["payload"] = nil }, "payload", "required"},
		{"payload that is not an object is rejected", TypeError, func(m, p map[string]any) { m["payload"] = "x" }, "payload", "type"},
		{"keys are case-sensitive", TypeError, func(m, p map[string]any) { m["TYPE"] = m["type"]; delete(m, "type") }, "type", "required"},
		{"null string value is a type error", TypeError, func(m, p map[string]any) { m["containerId"] = nil }, "containerId", "type"},
		{"unknown fields are ignored", TypeError, func(m, p map[string]any) { m["extra"] = 1; p["more"] = true }, "", ""},
	}
}

// payloadRuleCases are TestParseRules' cases of each type's payload fields.
func payloadRuleCases() []ruleCase {
	return []ruleCase{
		// task-request
		{"task-request without envVars is valid", TypeTaskRequest, func(m, p map[string]any) { delete(p, "envVars") }, "", ""},
		{"branch with slash underscore dash is valid", TypeTaskRequest, func(m, p map[string]any) { p["branchName"] = "a/b_c-d9" }, "", ""},
		{"branch with leading dash is rejected", TypeTaskRequest, func(m, p map[string]any) { p["branchName"] = "-x" }, "payload.branchName", "branch"},
		{"branch with dot is rejected", TypeTaskRequest, func(m, p map[string]any) { p["branchName"] = "v1.2" }, "payload.branchName", "branch"},
		{"branch with non-ASCII letter is rejected", TypeTaskRequest, func(m, p map[string]any) { p["branchName"] = "fé" }, "payload.branchName", "branch"},
		{"missing branch is required", TypeTaskRequest, func(m, p map[string]any) { delete(p, "branchName") }, "payload.branchName", "required"},
		{"taskFilePath yaml is rejected", TypeTaskRequest, func(m, p map[string]any) { p["taskFilePath"] = "a.yaml" }, "payload.taskFilePath", "taskpath"},
		{"absolute taskFilePath is rejected", TypeTaskRequest, func(m, p map[string]any) { p["taskFilePath"] = "/etc/x.json" }, "payload.taskFilePath", "taskpath"},
		{"taskFilePath with .. is rejected", TypeTaskRequest, func(m, p map[string]any) { p["taskFilePath"] = ".aimi/../../x.json" }, "payload.taskFilePath", "taskpath"},
		{"repoUrl ssh scheme is valid", TypeTaskRequest, func(m, p map[string]any) { p["repoUrl"] = "ssh://git@github.com/org/repo.git" }, "", ""},
		{"repoUrl scp form is valid", TypeTaskRequest, func(m, p map[string]any) { p["repoUrl"] = "git@github.com:org/repo.git" }, "", ""},
		{"repoUrl http is rejected", TypeTaskRequest, func(m, p map[string]any) { p["repoUrl"] = "http://github.com/org/repo.git" }, "payload.repoUrl", "repourl"},
		{"repoUrl ftp is rejected", TypeTaskRequest, func(m, p map[string]any) { p["repoUrl"] = "ftp://h/r.git" }, "payload.repoUrl", "repourl"},
		{"repoUrl local path is rejected", TypeTaskRequest, func(m, p map[string]any) { p["repoUrl"] = "/srv/repo.git" }, "payload.repoUrl", "repourl"},
		{"repoUrl https without host is rejected", TypeTaskRequest, func(m, p map[string]any) { p["repoUrl"] = "https:///repo.git" }, "payload.repoUrl", "repourl"},
		{"envVars lowercase key is rejected", TypeTaskRequest, func(m, p map[string]any) { p["envVars"] = map[string]any{"node_env": "x"} }, "payload.envVars[node_env]", "envkey"},
		{"envVars key starting with digit is rejected", TypeTaskRequest, func(m, p map[string]any) { p["envVars"] = map[string]any{"1X": "x"} }, "payload.envVars[1X]", "envkey"},
		{"envVars key starting with underscore is valid", TypeTaskRequest, func(m, p map[string]any) { p["envVars"] = map[string]any{"_X1": ""} }, "", ""},
		{"envVars number value is a type error", TypeTaskRequest, func(m, p map[string]any) { p["envVars"] = map[string]any{"PORT": 8080} }, "payload.envVars[PORT]", "type"},
		{"envVars array is a type error", TypeTaskRequest, func(m, p map[string]any) { p["envVars"] = []any{"A"} }, "payload.envVars", "type"},
		// progress-update
		{"each story status is valid", TypeProgressUpdate, func(m, p map[string]any) { p["status"] = "skipped" }, "", ""},
		{"storyId lowercase is rejected", TypeProgressUpdate, func(m, p map[string]any) { p["storyId"] = "us-001" }, "payload.storyId", "storyid"},
		{"storyId with 4 digits is rejected", TypeProgressUpdate, func(m, p map[string]any) { p["storyId"] = "US-0001" }, "payload.storyId", "storyid"},
		{"storyId with non-ASCII digit is rejected", TypeProgressUpdate, func(m, p map[string]any) { p["storyId"] = "US-00٣" }, "payload.storyId", "storyid"},
		{"status done is rejected", TypeProgressUpdate, func(m, p map[string]any) { p["status"] = "done" }, "payload.status", "oneof"},
		{"missing output is required", TypeProgressUpdate, func(m, p map[string]any) { delete(p, "output") }, "payload.output", "required"},
		{"empty output is valid", TypeProgressUpdate, func(m, p map[string]any) { p["output"] = "" }, "", ""},
		{"output of 2000 ASCII chars is valid", TypeProgressUpdate, func(m, p map[string]any) { p["output"] = strings.Repeat("x", 2000) }, "", ""},
		{"output of 2001 ASCII chars is rejected", TypeProgressUpdate, func(m, p map[string]any) { p["output"] = strings.Repeat("x", 2001) }, "payload.output", "max"},
		{"output of 2000 multibyte chars is valid", TypeProgressUpdate, func(m, p map[string]any) { p["output"] = strings.Repeat("日", 2000) }, "", ""},
		{"output of 2000 emoji is valid", TypeProgressUpdate, func(m, p map[string]any) { p["output"] = strings.Repeat("🚀", 2000) }, "", ""},
		{"output of 2001 multibyte chars is rejected", TypeProgressUpdate, func(m, p map[string]any) { p["output"] = strings.Repeat("é", 2001) }, "payload.output", "max"},
		{"output of wrong kind is a type error", TypeProgressUpdate, func(m, p map[string]any) { p["output"] = []any{"x"} }, "payload.output", "type"},
		// completion
		{"null prUrl is valid", TypeCompletion, func(m, p map[string]any) { p["prUrl"] = nil }, "", ""},
		{"missing prUrl is rejected", TypeCompletion, func(m, p map[string]any) { delete(p, "prUrl") }, "payload.prUrl", "required"},
		{"prUrl that is not a URL is rejected", TypeCompletion, func(m, p map[string]any) { p["prUrl"] = "pull 42" }, "payload.prUrl", "weburl"},
		{"prUrl number is a type error", TypeCompletion, func(m, p map[string]any) { p["prUrl"] = 42 }, "payload.prUrl", "type"},
		{"completion status stopped is valid", TypeCompletion, func(m, p map[string]any) { p["status"] = "stopped" }, "", ""},
		{"completion status done is rejected", TypeCompletion, func(m, p map[string]any) { p["status"] = "done" }, "payload.status", "oneof"},
		{"missing errors is rejected", TypeCompletion, func(m, p map[string]any) { delete(p, "errors") }, "payload.errors", "required"},
		{"null errors is rejected", TypeCompletion, func(m, p map[string]any) { p["errors"] = nil }, "payload.errors", "required"},
		{"50 errors are valid", TypeCompletion, func(m, p map[string]any) { p["errors"] = strs(50, "e") }, "", ""},
		{"51 errors are rejected", TypeCompletion, func(m, p map[string]any) { p["errors"] = strs(51, "e") }, "payload.errors", "max"},
		{"error entry of 500 multibyte chars is valid", TypeCompletion, func(m, p map[string]any) { p["errors"] = strs(1, strings.Repeat("ü", 500)) }, "", ""},
		{"error entry of 501 chars is rejected", TypeCompletion, func(m, p map[string]any) { p["errors"] = []any{"ok", strings.Repeat("e", 501)} }, "payload.errors[1]", "max"},
		{"non-string error entry is a type error", TypeCompletion, func(m, p map[string]any) { p["errors"] = []any{1} }, "payload.errors[0]", "type"},
		// error
		{"custom error code is valid", TypeError, func(m, p map[string]any) { p["code"] = "MISSING_ENV_VAR2" }, "", ""},
		{"lowercase error code is rejected", TypeError, func(m, p map[string]any) { p["code"] = "container_oom" }, "payload.code", "errcode"},
		{"error code starting with underscore is rejected", TypeError, func(m, p map[string]any) { p["code"] = "_X" }, "payload.code", "errcode"},
		{"empty error code is rejected", TypeError, func(m, p map[string]any) { p["code"] = "" }, "payload.code", "errcode"},
		{"error message of 2000 chars is valid", TypeError, func(m, p map[string]any) { p["message"] = strings.Repeat("ß", 2000) }, "", ""},
		{"error message of 2001 chars is rejected", TypeError, func(m, p map[string]any) { p["message"] = strings.Repeat("m", 2001) }, "payload.message", "max"},
		{"missing error message is required", TypeError, func(m, p map[string]any) { delete(p, "message") }, "payload.message", "required"},
	}
}

// checkParseRule parses tc's message and checks it is valid or fails on
// tc's field and rule with a message.
func checkParseRule(t *testing.T, tc ruleCase) {
	m := base(tc.typ)
	if tc.mut != nil {
		p, _ := m["payload"].(map[string]any)
		tc.mut(m, p)
	}
	line, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	_, err = Parse(line)
	if tc.wantField == "" {
		if err != nil {
			t.Fatalf("want valid, got %v", err)
		}
		return
	}
	var ve *ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("want *ValidationError on %s, got %v", tc.wantField, err)
	}
	for _, f := range ve.Fields {
		if f.Field == tc.wantField && f.Rule == tc.wantRule {
			if f.Message == "" {
				t.Errorf("field error without message: %+v", f)
			}
			return
		}
	}
	t.Fatalf("want %s/%s, got %+v", tc.wantField, tc.wantRule, ve.Fields)
}

func TestParseLineLevel(t *testing.T) {
	valid, _ := json.Marshal(base(TypeError))
	pad := func(n int) []byte { // a valid error message line of exactly n bytes
		m := base(TypeError)
		m["extra"] = ""
		b, _ := json.Marshal(m)
		m["extra"] = strings.Repeat("x", n-len(b))
		b, _ = json.Marshal(m)
		if len(b) != n {
			t.Fatalf("pad: %d != %d", len(b), n)
		}
		return b
	}
	cases := []struct {
		name string
		line []byte
		want error // nil: valid
	}{
		{"line with trailing newline is valid", append(append([]byte{}, valid...), '\n'), nil},
		{"line with CRLF is valid", append(append([]byte{}, valid...), '\r', '\n'), nil},
		{"line of exactly 64 KiB is valid", pad(MaxLineBytes), nil},
		{"line of 64 KiB plus one byte is too long", pad(MaxLineBytes + 1), ErrLineTooLong},
		{"empty line is rejected", []byte(""), ErrEmptyLine},
		{"blank line is rejected", []byte("  \t"), ErrEmptyLine},
		{"invalid UTF-8 is rejected", bytes.Replace(valid, []byte("out of"), []byte("out\xffof"), 1), ErrInvalidUTF8},
		{"JSON array is malformed", []byte(`[1,2]`), ErrMalformed},
		{"JSON string is malformed", []byte(`"x"`), ErrMalformed},
		{"null is malformed", []byte(`null`), ErrMalformed},
		{"two objects on a line are malformed", append(append([]byte{}, valid...), valid...), ErrMalformed},
		{"truncated object is malformed", valid[:len(valid)-3], ErrMalformed},
		{"trailing comma is malformed", append(append([]byte{}, valid[:len(valid)-1]...), ",}"...), ErrMalformed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(tc.line)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("want valid, got %v", err)
				}
				return
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("want %v, got %v", tc.want, err)
			}
			if fe := FieldErrors(err); len(fe) != 1 || fe[0].Message == "" {
				t.Errorf("FieldErrors = %+v", fe)
			}
		})
	}
}

func TestParseDecodesTypedPayloads(t *testing.T) {
	line, _ := json.Marshal(base(TypeTaskRequest))
	m, err := Parse(line)
	if err != nil {
		t.Fatal(err)
	}
	tr, ok := m.Payload.(*TaskRequest)
	if !ok || tr.EnvVars["NODE_ENV"] != "dev" || tr.BranchName != "feat/x" {
		t.Fatalf("payload = %#v", m.Payload)
	}
	noEnv := base(TypeTaskRequest)
	delete(noEnv["payload"].(map[string]any), "envVars")
	line, _ = json.Marshal(noEnv)
	m, err = Parse(line)
	if err != nil {
		t.Fatal(err)
	}
	if env := m.Payload.(*TaskRequest).EnvVars; env == nil || len(env) != 0 {
		t.Errorf("absent envVars decoded as %#v, want empty map", env)
	}
	c := base(TypeCompletion)
	c["payload"].(map[string]any)["prUrl"] = nil
	line, _ = json.Marshal(c)
	m, err = Parse(line)
	if err != nil {
		t.Fatal(err)
	}
	if p := m.Payload.(*Completion); p.PRURL != nil || p.Errors == nil {
		t.Errorf("completion = %#v", p)
	}
}

func TestDirection(t *testing.T) {
	tr, _ := json.Marshal(base(TypeTaskRequest))
	pu, _ := json.Marshal(base(TypeProgressUpdate))
	if _, err := ParseFromContainer(tr); err == nil || FieldErrors(err)[0].Rule != "direction" {
		t.Errorf("container task-request: %v, want direction error", err)
	}
	if _, err := ParseFromContainer(pu); err != nil {
		t.Errorf("container progress-update: %v", err)
	}
	if _, p, err := ParseTaskRequest(tr); err != nil || p == nil || p.RepoURL == "" {
		t.Errorf("runner task-request: %v %v", p, err)
	}
	if _, _, err := ParseTaskRequest(pu); err == nil || FieldErrors(err)[0].Rule != "direction" {
		t.Errorf("runner progress-update: %v, want direction error", err)
	}
}

func TestValidateConstructedMessages(t *testing.T) {
	pr := "https://github.com/o/r/pull/1"
	cases := []struct {
		name  string
		msg   Message
		valid bool
	}{
		{"completion with nil errors is invalid", NewMessage(TypeCompletion, testSwarmID, "c", &Completion{Status: "completed"}), false},
		{"completion with empty errors is valid", NewMessage(TypeCompletion, testSwarmID, "c", &Completion{Status: "completed", Errors: []string{}}), true},
		{"completion with PR URL is valid", NewMessage(TypeCompletion, testSwarmID, "c", &Completion{Status: "failed", PRURL: &pr, Errors: CapErrors(nil)}), true},
		{"payload of another type is invalid", NewMessage(TypeError, testSwarmID, "c", &ProgressUpdate{StoryID: "US-001", Status: "pending"}), false},
		{"nil payload is invalid", NewMessage(TypeError, testSwarmID, "c", nil), false},
		{"task-request with nil envVars is valid", NewMessage(TypeTaskRequest, testSwarmID, "c", &TaskRequest{TaskFilePath: "a.json", BranchName: "b", RepoURL: "git@h:p"}), true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.msg.Validate()
			if (err == nil) != tc.valid {
				t.Fatalf("Validate() = %v, want valid=%v", err, tc.valid)
			}
		})
	}
}

func TestRoundTrip(t *testing.T) {
	for _, typ := range []Type{TypeTaskRequest, TypeProgressUpdate, TypeCompletion, TypeError} {
		t.Run(string(typ), func(t *testing.T) {
			line, _ := json.Marshal(base(typ))
			m, err := Parse(line)
			if err != nil {
				t.Fatal(err)
			}
			out, err := Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			m2, err := Parse(out)
			if err != nil {
				t.Fatalf("re-parse %s: %v", out, err)
			}
			if !reflect.DeepEqual(m, m2) {
				t.Fatalf("round trip differs:\n%#v\n%#v", m, m2)
			}
			var m3 Message
			if err := json.Unmarshal(out, &m3); err != nil || !reflect.DeepEqual(m, m3) {
				t.Fatalf("json.Unmarshal: %v %#v", err, m3)
			}
		})
	}
}

func TestUnmarshalJSONRejectsUnknownType(t *testing.T) {
	var m Message
	if err := json.Unmarshal([]byte(`{"type":"heartbeat","timestamp":"x","swarmId":"x","containerId":"x","payload":{}}`), &m); err == nil {
		t.Fatal("unknown type decoded without error")
	}
}

func TestFieldErrorValueHidesURLCredentials(t *testing.T) {
	m := base(TypeTaskRequest)
	m["payload"].(map[string]any)["repoUrl"] = "http://x-token:ghp_secret123@github.com/o/r.git"
	line, _ := json.Marshal(m)
	_, err := Parse(line)
	fe := FieldErrors(err)
	if len(fe) != 1 || fe[0].Field != "payload.repoUrl" {
		t.Fatalf("field errors = %+v", fe)
	}
	if strings.Contains(err.Error(), "secret") || fe[0].Value != "http://***@github.com/o/r.git" {
		t.Fatalf("credentials leak into the error: %q", fe[0].Value)
	}
}

func TestFieldErrorValueIsCutShort(t *testing.T) {
	m := base(TypeProgressUpdate)
	m["payload"].(map[string]any)["storyId"] = strings.Repeat("ü", 1000)
	line, _ := json.Marshal(m)
	_, err := Parse(line)
	fe := FieldErrors(err)
	if len(fe) != 1 || len([]rune(fe[0].Value)) > maxValueRunes+1 {
		t.Fatalf("field errors = %+v", fe)
	}
	if !strings.Contains(err.Error(), "payload.storyId") {
		t.Errorf("Error() does not name the field: %s", err)
	}
}

func TestTaskRequestBranchExistsIsAnOptionalExtension(t *testing.T) {
	base := `{"type":"task-request","timestamp":"2026-03-01T10:00:00Z","swarmId":"` + testSwarmID + `","containerId":"abc123def456","payload":{"taskFilePath":".aimi/tasks/a.json","branchName":"feat/a","repoUrl":"https://example.com/r.git"`
	yes, no := true, false
	for _, tc := range []struct {
		extra string
		want  *bool
	}{
		{``, nil},
		{`,"branchExists":true`, &yes},
		{`,"branchExists":false`, &no},
		{`,"branchExists":null`, nil},
		{`,"branchExists":"yes"`, nil}, // not a boolean: unknown, never invalid
		{`,"branchExists":{"a":[1]}`, nil},
	} {
		_, req, err := ParseTaskRequest([]byte(base + tc.extra + `}}`))
		if err != nil {
			t.Fatalf("%s: %v", tc.extra, err)
		}
		if (req.BranchExists == nil) != (tc.want == nil) || (tc.want != nil && *req.BranchExists != *tc.want) {
			t.Errorf("%s: branchExists %v, want %v", tc.extra, req.BranchExists, tc.want)
		}
	}
	for _, v := range []*bool{nil, &yes, &no} {
		line, err := Marshal(NewMessage(TypeTaskRequest, testSwarmID, "abc123def456", &TaskRequest{
			TaskFilePath: ".aimi/tasks/a.json", BranchName: "feat/a", RepoURL: "https://example.com/r.git", BranchExists: v,
		}))
		if err != nil {
			t.Fatal(err)
		}
		_, req, err := ParseTaskRequest(line)
		if err != nil {
			t.Fatal(err)
		}
		if (v == nil) != (req.BranchExists == nil) || (v != nil && *v != *req.BranchExists) {
			t.Errorf("%s: round trip gave %v, want %v", line, req.BranchExists, v)
		}
		if v == nil && strings.Contains(string(line), "branchExists") {
			t.Errorf("an unknown answer is on the wire: %s", line)
		}
	}
}
