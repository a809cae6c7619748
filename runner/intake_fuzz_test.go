package runner

import (
	"bytes"
	"strings"
	"testing"

	"github.com/aimi-tools/swarm/acpmsg"
	"github.com/aimi-tools/swarm/gitref"
)

// FuzzReadRequest feeds arbitrary stdin to the task-request intake: it must
// never panic, must classify every failure as INVALID_INPUT or
// TASK_FILE_INVALID with a message that fits an error payload, and must only
// accept requests whose fields the runner can use safely.
func FuzzReadRequest(f *testing.F) {
	f.Add([]byte(`{"type":"task-request","timestamp":"2026-03-01T10:00:00Z","swarmId":"a1b2c3d4-e5f6-4a7b-8c9d-0e1f2a3b4c5d","containerId":"abc123def456","payload":{"taskFilePath":".aimi/tasks/2026-03-01-feature-tasks.json","branchName":"feat/my-feature","repoUrl":"https://github.com/org/repo.git","envVars":{"NODE_ENV":"development"}}}` + "\n"))
	f.Add([]byte(`{"type":"task-request","timestamp":"2026-03-01T10:00:00Z","swarmId":"a1b2c3d4-e5f6-4a7b-8c9d-0e1f2a3b4c5d","containerId":"abc","payload":{"taskFilePath":"../x.json","branchName":"-x","repoUrl":"file:///etc","envVars":{"bad key":"v"}}}`))
	f.Add([]byte("{}\n"))
	f.Add([]byte("\xff\xfe\n"))
	f.Add([]byte(""))
	f.Fuzz(func(t *testing.T, in []byte) {
		msg, req, perr := readRequest(bytes.NewReader(in))
		if perr != nil {
			if perr.code != acpmsg.CodeInvalidInput && perr.code != acpmsg.CodeTaskFileInvalid {
				t.Fatalf("code %s", perr.code)
			}
			if req != nil {
				t.Fatal("request returned with an error")
			}
			e := acpmsg.NewMessage(acpmsg.TypeError, "a1b2c3d4-e5f6-4a7b-8c9d-0e1f2a3b4c5d", "c", &acpmsg.ErrorPayload{Code: perr.code, Message: acpmsg.TruncateOutput(perr.msg)})
			if err := e.Validate(); err != nil {
				t.Fatalf("error message for %q does not validate: %v", in, err)
			}
			return
		}
		if msg.Type != acpmsg.TypeTaskRequest || req == nil {
			t.Fatalf("accepted %s", msg.Type)
		}
		if !gitref.ValidBranch(req.BranchName) || strings.HasPrefix(req.TaskFilePath, "/") || strings.Contains("/"+req.TaskFilePath+"/", "/../") {
			t.Fatalf("accepted unsafe request %+v", req)
		}
		if !strings.HasPrefix(req.RepoURL, "https://") && !strings.HasPrefix(req.RepoURL, "ssh://") && !strings.Contains(req.RepoURL, "@") {
			t.Fatalf("accepted repo url %q", req.RepoURL)
		}
	})
}
