package main

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/cli"
	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/internal/dockertest"
	"github.com/aimi-tools/swarm/state"
)

// lineCounter counts the lines written to it and keeps none of them.
type lineCounter struct{ n atomic.Int64 }

func (c *lineCounter) Write(p []byte) (int, error) {
	c.n.Add(int64(bytes.Count(p, []byte{'\n'})))
	return len(p), nil
}

// fillJournalToItsCap appends stderr records to a container's journal with
// the daemon's own writer until the journal is at its cap and gap records
// count what it left out, as a container flooding its output leaves it. The
// records carry no cursor: the container's real output is still read from
// where the daemon left it. It returns the number of records journaled.
func fillJournalToItsCap(t *testing.T, repo, name string) int64 {
	t.Helper()
	ctx := context.Background()
	store := state.Open(repo)
	sw, err := store.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c := sw.Container(name)
	if c == nil {
		t.Fatalf("no %s in the state file", name)
	}
	tr, _, err := state.RestoreTracker(store.JournalPath(contract.Sandbox{Swarm: sw.SwarmID, Container: name}), nil)
	if err != nil {
		t.Fatal(err)
	}
	rec := state.NewRecorder(store, sw, state.RecorderOptions{Logger: slog.New(slog.DiscardHandler)})
	if err := rec.Track(c.Clone(), tr); err != nil {
		t.Fatal(err)
	}
	// Past the cap, enough for a few gap records (one per MiB left out).
	for i := 0; rec.Stats().Omitted < 30000; i++ {
		r := state.Record{Stream: state.StreamStderr}
		r.SetRaw(fmt.Appendf(nil, "npm http fetch GET 200 /pkg-%d", i))
		if err := rec.Record(ctx, name, r, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := rec.Close(ctx); err != nil {
		t.Fatal(err)
	}
	pos, err := state.LastPosition(store.JournalPath(contract.Sandbox{Swarm: sw.SwarmID, Container: name}))
	if err != nil {
		t.Fatal(err)
	}
	return pos.Seq
}

// TestJournalAtItsCapIsReadInBoundedMemory: a container's journal at the
// 128 MiB cap (about a million records) is adopted by a restarted daemon
// and read by four `aimi swarm logs` at once, and the daemon's peak
// resident memory stays bounded: every reader streams the journal, none
// holds it whole. --tail reads the end without the rest.
func TestJournalAtItsCapIsReadInBoundedMemory(t *testing.T) {
	parallel(t)
	dockertest.Long(t)
	image := standinImage(t)
	repo := gitRepo(t, 1, "big")
	dir := shortDir(t)
	sock := filepath.Join(dir, "aimid.sock")
	scripts := map[string]string{"STANDIN_SCRIPT": "progress|US-001|in_progress|working;sleep|10m"}
	p := launch(t, daemonOpts{Sock: sock, DataDir: filepath.Join(dir, "data"), Image: image, Scripts: scripts})
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	run, _ := recordingAimi(ctx, repo, sock)
	if code, _, errOut := run("swarm", "start", "--all"); code != 0 {
		t.Fatalf("start: exit %d %s", code, errOut)
	}
	running := func(v api.SwarmView) bool {
		return len(v.State.Containers) == 1 && v.State.Containers[0].Status == "running" &&
			v.State.Containers[0].StoryProgress.InProgress == 1
	}
	waitFor(t, sock, repo, 2*time.Minute, "the container running with progress", running)
	p.stop(t)

	// Names are the engine's, shared with other tests: found by task file.
	name := containerOf(t, validState(t, repo), "big").ContainerName
	records := fillJournalToItsCap(t, repo, name)
	t.Logf("journal of %s: %d records", name, records)

	restarted := time.Now()
	p2 := launch(t, daemonOpts{Sock: sock, DataDir: filepath.Join(dir, "data"), Image: image, Scripts: scripts})
	waitFor(t, sock, repo, 3*time.Minute, "the container adopted, running", running)
	adopted := peakRSS(t, p2.cmd.Process.Pid)
	t.Logf("adopted in %v", time.Since(restarted).Round(time.Millisecond))

	// The end of the journal, read from the end.
	code, out, errOut := run("swarm", "logs", name, "--tail", "3", "--json")
	var seqs []int64
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		r, err := state.DecodeRecord([]byte(l))
		if err != nil {
			t.Fatalf("--tail 3: %v in %q", err, l)
		}
		seqs = append(seqs, r.Seq)
	}
	if code != 0 || len(seqs) != 3 || seqs[0] < records-2 || seqs[1] != seqs[0]+1 || seqs[2] != seqs[1]+1 {
		t.Fatalf("--tail 3: exit %d, seqs %v (the journal had %d records before the restart): %s", code, seqs, records, errOut)
	}

	var wg sync.WaitGroup
	counts := make([]lineCounter, 4)
	codes := make([]int, len(counts))
	errs := make([]bytes.Buffer, len(counts))
	for i := range counts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes[i] = cli.Run(ctx, []string{"swarm", "logs", name, "--json", "--repo", repo, "--socket", sock},
				cli.Streams{In: strings.NewReader(""), Out: &counts[i], Err: &errs[i]})
		}()
	}
	wg.Wait()
	for i := range counts {
		if codes[i] != 0 || counts[i].n.Load() < records {
			t.Errorf("logs %d: exit %d, %d of %d records: %s", i, codes[i], counts[i].n.Load(), records, errs[i].String())
		}
	}
	peak := peakRSS(t, p2.cmd.Process.Pid)
	t.Logf("aimid peak RSS: %d MB after the adoption, %d MB after 4 concurrent logs", adopted>>20, peak>>20)
	if peak > 150<<20 {
		t.Errorf("aimid's peak RSS is %d MB reading a %d-record journal (after the adoption: %d MB)", peak>>20, records, adopted>>20)
	}
	if code, _, errOut := run("swarm", "stop"); code != 0 {
		t.Errorf("stop: exit %d %s", code, errOut)
	}
	p2.stop(t)
}
