package orchestrator

// Programs the fake engine's containers run in the tests: a task-request
// read, message lines, and scripted steps.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/aimi-tools/swarm/acpmsg"
	"github.com/aimi-tools/swarm/contract"
)

// readRequest reads the task-request (past a claimed sandbox's claim
// lines) and returns swarm and container ids.
func readRequest(ctx context.Context, stdin <-chan []byte) (swarmID, containerID string, ok bool) {
	select {
	case line := <-stdin:
		if bytes.HasPrefix(line, []byte(contract.WarmClaimPrefix)) {
			return readRequest(ctx, stdin)
		}
		var m struct {
			SwarmID     string `json:"swarmId"`
			ContainerID string `json:"containerId"`
		}
		if json.Unmarshal(line, &m) != nil {
			return "", "", false
		}
		return m.SwarmID, m.ContainerID, true
	case <-ctx.Done():
		return "", "", false
	}
}

// msgLine renders one message line.
func msgLine(swarmID, containerID string, p acpmsg.Payload) string {
	var t acpmsg.Type
	switch p.(type) {
	case *acpmsg.ProgressUpdate:
		t = acpmsg.TypeProgressUpdate
	case *acpmsg.Completion:
		t = acpmsg.TypeCompletion
	case *acpmsg.ErrorPayload:
		t = acpmsg.TypeError
	}
	b, err := json.Marshal(acpmsg.NewMessage(t, swarmID, containerID, p))
	if err != nil {
		panic(err)
	}
	return string(b)
}

// step is one action of a scripted fake program.
type step struct {
	story, status string // progress-update
	complete      string // completion status
	errCode       string // error message
	raw           string // a raw line
	sleep         time.Duration
	exit          *int
	oom           bool
	hang          bool // wait for SIGTERM/kill
	trap          bool // on SIGTERM: completion stopped, exit 0
}

func exitStep(code int) step { return step{exit: &code} }

// scripted runs steps after reading the task-request, pausing pace between
// emitted lines.
func scripted(pace time.Duration, steps ...step) program {
	return func(ctx context.Context, stdin <-chan []byte, emit func(string), term <-chan struct{}) (int, bool) {
		sid, cid, ok := readRequest(ctx, stdin)
		if !ok {
			return 2, false
		}
		trap := false
		wait := func(d time.Duration) bool {
			if d <= 0 {
				return true
			}
			t := time.NewTimer(d)
			defer t.Stop()
			select {
			case <-t.C:
				return true
			case <-ctx.Done():
				return false
			case <-term:
				return !trap // without a trap, SIGTERM is ignored (PID 1)
			}
		}
		for _, s := range steps {
			select {
			case <-term:
				if trap {
					emit(msgLine(sid, cid, &acpmsg.Completion{Status: "stopped", Errors: []string{"SIGTERM"}}))
					return 0, false
				}
			default:
			}
			switch {
			case s.trap:
				trap = true
				continue
			case s.sleep > 0:
				if !wait(s.sleep) {
					if trap && ctx.Err() == nil {
						emit(msgLine(sid, cid, &acpmsg.Completion{Status: "stopped", Errors: []string{"SIGTERM"}}))
						return 0, false
					}
					return 137, false
				}
				continue
			case s.exit != nil:
				return *s.exit, false
			case s.oom:
				return 137, true
			case s.hang:
				select {
				case <-ctx.Done():
					return 137, false
				case <-term:
					if trap {
						emit(msgLine(sid, cid, &acpmsg.Completion{Status: "stopped", Errors: []string{"SIGTERM"}}))
						return 0, false
					}
					<-ctx.Done()
					return 137, false
				}
			}
			if !wait(pace) {
				return 137, false
			}
			switch {
			case s.story != "":
				emit(msgLine(sid, cid, &acpmsg.ProgressUpdate{StoryID: s.story, Status: s.status, Output: s.story + " " + s.status}))
			case s.complete != "":
				emit(msgLine(sid, cid, &acpmsg.Completion{Status: s.complete, Errors: []string{}}))
			case s.errCode != "":
				emit(msgLine(sid, cid, &acpmsg.ErrorPayload{Code: s.errCode, Message: "failed with " + s.errCode}))
			case s.raw != "":
				emit(s.raw)
			}
		}
		return 0, false
	}
}

// storiesDone is the happy path for n stories.
func storiesDone(n int) []step {
	var out []step
	for i := 1; i <= n; i++ {
		id := fmt.Sprintf("US-%03d", i)
		out = append(out, step{story: id, status: "in_progress"}, step{story: id, status: "completed"})
	}
	return append(out, step{complete: "completed"})
}
