package main

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/state"
)

// TestOutputFloodIsJournaledWholeAndOnce: a container printing 200,000
// stderr lines and then 20,000 progress-updates as fast as it can, against
// the real daemon and engine. Every line reaches the journal exactly once,
// in order: the engine's following reader skipped and repeated lines of
// such a flood, and a reader resumed from the stdout cursor journaled
// stderr twice.
//
// Not parallel: exactness past the engine's log rotation needs the engine
// to answer the daemon's calls within its bound (2 s), which the package's
// other tests running beside it can break on 2 cores (seen: an engine call
// unanswered, the hold-back given up, stderr lines rotated away).
func TestOutputFloodIsJournaledWholeAndOnce(t *testing.T) {
	image := standinImage(t)
	repo := gitRepo(t, 1, "flood")
	dir := shortDir(t)
	sock := filepath.Join(dir, "aimid.sock")
	const nErr, nFlood = 200000, 20000
	launch(t, daemonOpts{
		Sock:    sock,
		DataDir: filepath.Join(dir, "data"),
		Image:   image,
		Scripts: map[string]string{
			"STANDIN_SCRIPT": fmt.Sprintf("errflood|%d;flood|%d|US-001;auto|1", nErr, nFlood),
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	if code, _, errOut := aimi(ctx, "swarm", "start", "--all", "--repo", repo, "--socket", sock); code != 0 {
		t.Fatalf("start: exit %d %s", code, errOut)
	}
	v := waitFor(t, sock, repo, 3*time.Minute, "the flood container completed", func(v api.SwarmView) bool {
		return len(v.State.Containers) == 1 && v.State.Containers[0].Status.Terminal()
	})
	c := v.State.Containers[0]
	if c.Status != state.StatusCompleted {
		t.Fatalf("container ended %s, want completed", c.Status)
	}
	recs, err := state.ReadJournal(filepath.Join(repo, ".aimi", "swarm", v.State.SwarmID, c.ContainerName+".ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	var errs, floods int
	for _, r := range recs {
		switch r.Stream {
		case state.StreamStderr:
			if want := fmt.Sprintf("err %d", errs); r.Raw != want {
				t.Fatalf("stderr line %d is %q (seq %d): lines lost or repeated before it", errs, r.Raw, r.Seq)
			}
			errs++
		case state.StreamStdout:
			var m struct {
				Payload struct {
					Output string `json:"output"`
				} `json:"payload"`
			}
			if err := json.Unmarshal(r.Message, &m); err != nil || !r.Valid {
				t.Fatalf("stdout record %d: valid=%v %v", r.Seq, r.Valid, err)
			}
			if floods < nFlood {
				if want := fmt.Sprintf("flood %d", floods); m.Payload.Output != want {
					t.Fatalf("progress-update %d says %q (seq %d): lines lost or repeated before it", floods, m.Payload.Output, r.Seq)
				}
				floods++
			}
		}
	}
	if errs != nErr || floods != nFlood {
		t.Fatalf("journaled %d stderr lines and %d flood progress-updates, want %d and %d", errs, floods, nErr, nFlood)
	}
}
