package state

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/spec"

	"github.com/aimi-tools/swarm/acpmsg"
	"github.com/aimi-tools/swarm/tasks"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

const testSwarmID = "6f1c2a3b-4d5e-4f60-8a7b-9c0d1e2f3a4b"

// compileSchema compiles the shared schema with format assertions on.
func compileSchema(tb testing.TB) *jsonschema.Schema {
	tb.Helper()
	sch, err := spec.CompileStateSchema()
	if err != nil {
		tb.Fatalf("compile schema: %v", err)
	}
	return sch
}

// validateState checks bytes against the schema, returning why not.
func validateState(sch *jsonschema.Schema, b []byte) error {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		return fmt.Errorf("not JSON: %w", err)
	}
	return sch.Validate(v)
}

func ptr[T any](v T) *T { return &v }

var t0 = time.Date(2026, 11, 22, 10, 31, 0, 0, time.UTC)

func newTestSwarm(names ...string) *Swarm {
	sw := &Swarm{SwarmID: testSwarmID, CreatedAt: t0, UpdatedAt: t0, Containers: []*Container{}}
	for i, n := range names {
		sw.Containers = append(sw.Containers, newTestContainer(i, n))
	}
	return sw
}

func newTestContainer(i int, name string) *Container {
	return &Container{
		ContainerID:   fmt.Sprintf("abc000abc%03x", i),
		ContainerName: name,
		TaskFilePath:  ".aimi/tasks/2026-03-01-" + name + "-tasks.json",
		BranchName:    "feat/" + name,
		Status:        StatusPending,
		CreatedAt:     t0,
		UpdatedAt:     t0,
	}
}

// taskFile makes a task file with the given story statuses, ids US-001...
func taskFile(statuses ...tasks.Status) *tasks.File {
	tf := &tasks.File{SchemaVersion: tasks.SchemaVersion}
	for i, s := range statuses {
		tf.UserStories = append(tf.UserStories, tasks.Story{ID: storyID(i), Priority: i + 1, Status: s})
	}
	return tf
}

func storyID(i int) string { return fmt.Sprintf("US-%03d", i+1) }

func pendingFile(n int) *tasks.File {
	st := make([]tasks.Status, n)
	for i := range st {
		st[i] = tasks.Pending
	}
	return taskFile(st...)
}

// msg builders; the timestamp makes distinct messages distinct.

func stamp(i int) string { return t0.Add(time.Duration(i) * time.Second).Format(time.RFC3339) }

func progress(i int, story string, st tasks.Status) acpmsg.Message {
	return acpmsg.Message{Type: acpmsg.TypeProgressUpdate, Timestamp: stamp(i), SwarmID: testSwarmID,
		ContainerID: "abc000abc000abc000", Payload: &acpmsg.ProgressUpdate{StoryID: story, Status: string(st), Output: "did " + story}}
}

func completion(i int, st string, pr *string) acpmsg.Message {
	return acpmsg.Message{Type: acpmsg.TypeCompletion, Timestamp: stamp(i), SwarmID: testSwarmID,
		ContainerID: "abc000abc000abc000", Payload: &acpmsg.Completion{Status: st, PRURL: pr, Errors: []string{}}}
}

func errorMsg(i int, code string) acpmsg.Message {
	return acpmsg.Message{Type: acpmsg.TypeError, Timestamp: stamp(i), SwarmID: testSwarmID,
		ContainerID: "abc000abc000abc000", Payload: &acpmsg.ErrorPayload{Code: code, Message: "boom"}}
}

func taskRequest(i int) acpmsg.Message {
	return acpmsg.Message{Type: acpmsg.TypeTaskRequest, Timestamp: stamp(i), SwarmID: testSwarmID,
		ContainerID: "abc000abc000abc000", Payload: &acpmsg.TaskRequest{TaskFilePath: ".aimi/tasks/x-tasks.json",
			BranchName: "feat/x", RepoURL: "https://example.com/r.git", EnvVars: map[string]string{"API_TOKEN": "s3cret"}}}
}
