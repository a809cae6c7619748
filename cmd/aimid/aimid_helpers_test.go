package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"
	"github.com/docker/docker/errdefs"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/spec"

	"github.com/aimi-tools/swarm/cli"
	"github.com/aimi-tools/swarm/daemon"
	"github.com/aimi-tools/swarm/daemon/instancelock"
	"github.com/aimi-tools/swarm/internal/dockertest"
	"github.com/aimi-tools/swarm/internal/testwait"
	"github.com/aimi-tools/swarm/state"
)

// proc is a running aimid.
type proc struct {
	cmd    *exec.Cmd
	sock   string
	stderr *bytes.Buffer // read it after the daemon exited, or via logs
	log    *lockedWriter
	done   chan error
}

// logs is the daemon's stderr so far, safe to read while it runs.
func (p *proc) logs() string {
	p.log.mu.Lock()
	defer p.log.mu.Unlock()
	return p.stderr.String()
}

// raceMark opens each report of the race detector in a Go program's stderr.
const raceMark = "WARNING: DATA RACE"

// raceReport is the race detector's reports in a daemon's log, or "".
func raceReport(log string) string {
	i := strings.Index(log, raceMark)
	if i < 0 {
		return ""
	}
	const most = 16 << 10 // a report is a few KiB; the first ones say enough
	return log[i:min(len(log), i+most)]
}

type lockedWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// String is what was written so far.
func (l *lockedWriter) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.String()
}

// stop ends the daemon with SIGTERM, as systemd does, and fails the test
// unless it exits cleanly.
func (p *proc) stop(t testing.TB) {
	t.Helper()
	p.cmd.Process.Signal(syscall.SIGTERM)
	if err := p.wait(t); err != nil {
		t.Errorf("aimid exit: %v", err)
	}
}

func (p *proc) wait(t testing.TB) error {
	t.Helper()
	select {
	case err := <-p.done:
		return err
	case <-time.After(60 * time.Second):
		t.Fatal("aimid did not exit")
		return nil
	}
}

func aimi(ctx context.Context, args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := cli.Run(ctx, args, cli.Streams{In: strings.NewReader(""), Out: &out, Err: &errb})
	return code, out.String(), errb.String()
}

// recordingAimi returns a runner of aimi commands against repo and the
// daemon at sock, and the list of every answer (stdout, stderr) it gave,
// for the leak checks.
func recordingAimi(ctx context.Context, repo, sock string) (run func(args ...string) (int, string, string), answers *[]string) {
	answers = &[]string{}
	run = func(args ...string) (int, string, string) {
		code, out, errOut := aimi(ctx, append(args, "--repo", repo, "--socket", sock)...)
		*answers = append(*answers, out, errOut)
		return code, out, errOut
	}
	return run, answers
}

// allExited: every container is terminal and its process has exited (a
// container is terminal by its completion a moment before its process exits
// and acpPid goes null).
func allExited(v api.SwarmView) bool {
	for _, c := range v.State.Containers {
		if !c.Status.Terminal() {
			return false
		}
	}
	for _, d := range v.Containers {
		if d.ExitCode == nil {
			return false
		}
	}
	return true
}

// validState reads the repo's state file and validates it against the
// schema (spec/swarm-state.schema.json).
func validState(t testing.TB, repo string) *state.Swarm {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repo, ".aimi", "swarm-state.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := spec.ValidateState(b); err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	sw, err := state.Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	return sw
}

// waitFor polls the daemon's status until cond holds.
func waitFor(t testing.TB, sock, repo string, d time.Duration, what string, cond func(api.SwarmView) bool) api.SwarmView {
	t.Helper()
	return pollStatus(t, sock, repo, d, what, cond, func(last api.SwarmView) string {
		b, _ := json.Marshal(last)
		return "\n" + string(b)
	})
}

// pollStatus polls the daemon's status every 100 ms until cond holds, and
// fails with what the last view was (told) once d has passed.
func pollStatus(t testing.TB, sock, repo string, d time.Duration, what string, cond func(api.SwarmView) bool, told func(api.SwarmView) string) api.SwarmView {
	t.Helper()
	c := daemon.NewClient(sock)
	defer c.Close()
	var last api.SwarmView
	testwait.Eventually(t, d, what, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		v, err := c.Status(ctx, repo)
		cancel()
		if err != nil {
			return fmt.Errorf("%w %s", err, told(last))
		}
		last = v
		if !cond(v) {
			return errors.New(told(v))
		}
		return nil
	})
	return last
}

// waitBranchesPublished waits up to d, for all of them, until the checkout
// has every one of branches (published); p, when not nil, is the daemon
// whose log a failure shows.
func waitBranchesPublished(t testing.TB, repo string, branches []string, d time.Duration, p *proc) {
	t.Helper()
	testwait.Eventually(t, d, fmt.Sprintf("branches %v published into the checkout", branches), func() error {
		for _, b := range branches {
			if exec.Command("git", "-C", repo, "rev-parse", "--verify", "--quiet", "refs/heads/"+b).Run() != nil {
				if p == nil {
					return fmt.Errorf("no branch %s", b)
				}
				return fmt.Errorf("no branch %s; daemon log:\n%s", b, p.logs())
			}
		}
		return nil
	})
}

// waitContainerExited waits up to d until the container id no longer
// runs; what says what that means to the test.
func waitContainerExited(t *testing.T, ctx context.Context, eng *client.Client, id string, d time.Duration, what string) {
	t.Helper()
	testwait.Eventually(t, d, what, func() error {
		info, err := eng.ContainerInspect(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if info.State.Running {
			return fmt.Errorf("%s still runs", info.Name)
		}
		return nil
	}, testwait.Every(200*time.Millisecond))
}

// checkExactJournals checks that every container completed its stories and
// that its journal holds what an uninterrupted run journals (each story
// in_progress then completed, then one completion), every line once.
func checkExactJournals(t *testing.T, repo string, sw *state.Swarm, stories int) {
	t.Helper()
	// What an uninterrupted run journals: each story in_progress then
	// completed, then one completion.
	var want []string
	for i := 1; i <= stories; i++ {
		want = append(want, fmt.Sprintf("US-%03d:in_progress", i), fmt.Sprintf("US-%03d:completed", i))
	}
	want = append(want, "completion:completed")
	for _, c := range sw.Containers {
		if c.Status != state.StatusCompleted || c.StoryProgress.Completed != stories || c.StoryProgress.Total != stories || c.ACPPID != nil {
			t.Errorf("%s: %s %+v acpPid=%v", c.ContainerName, c.Status, c.StoryProgress, c.ACPPID)
		}
		recs, err := state.ReadJournal(filepath.Join(repo, ".aimi", "swarm", sw.SwarmID, c.ContainerName+".ndjson"))
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		cursors := map[string]bool{}
		for _, r := range recs {
			if r.Stream == "daemon" {
				continue
			}
			key := r.Stream + " " + r.Cursor.String()
			if cursors[key] {
				t.Errorf("%s: %s cursor %s journaled twice", c.ContainerName, r.Stream, r.Cursor)
			}
			cursors[key] = true
			var m struct {
				Type    string `json:"type"`
				Payload struct {
					StoryID string `json:"storyId"`
					Status  string `json:"status"`
				} `json:"payload"`
			}
			if err := json.Unmarshal(r.Message, &m); err != nil || !r.Valid {
				t.Errorf("%s: record %d: valid=%v %v", c.ContainerName, r.Seq, r.Valid, err)
			}
			if m.Type == "completion" {
				got = append(got, "completion:"+m.Payload.Status)
			} else {
				got = append(got, m.Payload.StoryID+":"+m.Payload.Status)
			}
		}
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("%s journal:\n%s\nwant\n%s", c.ContainerName, strings.Join(got, " "), strings.Join(want, " "))
			for _, r := range recs {
				t.Logf("  seq=%d cursor=%s time=%s stream=%s type=%s", r.Seq, r.Cursor, r.Time.Format("15:04:05.000"), r.Stream, r.Type)
			}
		}
	}
}

// removeInstanceMarker removes the instance marker a killed daemon (pid)
// left on the engine; a marker of any other process stays.
func removeInstanceMarker(t testing.TB, instance string, pid int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cli := dockertest.Client(t)
	insp, err := cli.ContainerInspect(ctx, instancelock.MarkerName(instance))
	if err != nil || insp.Config == nil || insp.Config.Labels[instancelock.LabelInstance] != instance || insp.Config.Labels[contract.LabelInstanceLockPID] != strconv.Itoa(pid) {
		return
	}
	if err := cli.ContainerRemove(ctx, insp.ID, container.RemoveOptions{Force: true}); err != nil && !errdefs.IsNotFound(err) {
		t.Errorf("remove the instance marker of killed aimid %d: %v", pid, err)
	}
}

// taskPath is the state file's path of gitRepo's task file name. Tests
// find containers by it: packages run in parallel, so a container name
// such as aimi-first may be held by another test and get a suffix.
func taskPath(name string) string { return ".aimi/tasks/" + name + "-tasks.json" }

// containerOf is sw's container of gitRepo's task file name; the test
// fails when there is none (a nil would panic the whole parallel run).
func containerOf(t testing.TB, sw *state.Swarm, name string) *state.Container {
	t.Helper()
	c := sw.ContainerForTask(taskPath(name))
	if c == nil {
		t.Fatalf("no container of %s in the state: %+v", taskPath(name), sw.Containers)
	}
	return c
}
