package acpmsg_test

import (
	"fmt"
	"os"
	"strings"

	"github.com/aimi-tools/swarm/acpmsg"
)

func ExampleReader() {
	in := strings.NewReader(`{"type":"progress-update","timestamp":"2026-03-01T10:05:00Z","swarmId":"a1b2c3d4-e5f6-4a7b-8c9d-0e1f2a3b4c5d","containerId":"abc","payload":{"storyId":"US-001","status":"completed","output":"done"}}
not json
{"type":"progress-update","timestamp":"2026-03-01T10:05:00Z","swarmId":"a1b2c3d4-e5f6-4a7b-8c9d-0e1f2a3b4c5d","containerId":"abc","payload":{"storyId":"us-1","status":"completed","output":"done"}}
`)
	r := acpmsg.NewReader(in)
	for {
		l, err := r.Next()
		if err != nil {
			break // io.EOF
		}
		if l.Err != nil {
			fmt.Printf("line %d: %v\n", l.Number, l.Err)
			continue
		}
		p := l.Msg.Payload.(*acpmsg.ProgressUpdate)
		fmt.Printf("line %d: %s %s\n", l.Number, p.StoryID, p.Status)
	}
	// Output:
	// line 1: US-001 completed
	// line 2: line is not exactly one JSON object: not a JSON object
	// line 3: invalid message: payload.storyId: must match ^US-\d{3}$ (got "us-1")
}

func ExampleWriter() {
	w := acpmsg.NewWriter(os.Stdout)
	m := acpmsg.NewMessage(acpmsg.TypeCompletion, "a1b2c3d4-e5f6-4a7b-8c9d-0e1f2a3b4c5d", "abc",
		&acpmsg.Completion{Status: acpmsg.CompletionCompleted, Errors: acpmsg.CapErrors(nil)})
	m.Timestamp = "2026-03-01T11:30:00.000Z" // fixed for the example
	if err := w.Write(m); err != nil {
		fmt.Println(err)
	}
	bad := acpmsg.NewMessage(acpmsg.TypeError, "not-a-uuid", "abc", &acpmsg.ErrorPayload{Code: "oops", Message: "x"})
	fmt.Println(w.Write(bad))
	// Output:
	// {"type":"completion","timestamp":"2026-03-01T11:30:00.000Z","swarmId":"a1b2c3d4-e5f6-4a7b-8c9d-0e1f2a3b4c5d","containerId":"abc","payload":{"status":"completed","prUrl":null,"errors":[]}}
	// refuse to write error message: invalid message: swarmId: must be a UUID version 4 in canonical form (got "not-a-uuid"); payload.code: must match ^[A-Z][A-Z0-9_]*$ (got "oops")
}
