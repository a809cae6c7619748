package orchestrator

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/acpmsg"
	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/container"
	"github.com/aimi-tools/swarm/engine"
	"github.com/aimi-tools/swarm/internal/dockertest"
	"github.com/aimi-tools/swarm/state"
)

// realBenchEngine is realEngine for benchmarks.
func realBenchEngine(b *testing.B) (*container.Docker, map[string]string) {
	b.Helper()
	t := &testing.T{}
	_ = t
	if standinErr != nil {
		b.Fatalf("build the stand-in image: %v", standinErr)
	}
	d, err := container.NewDocker(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	run := dockertest.RunID()
	dockertest.Cleanup(b, dockertest.LabelKey, run)
	b.Cleanup(func() { d.Close() })
	return d, map[string]string{dockertest.LabelKey: run}
}

// BenchmarkFanOut measures the time from Start to all N containers running
// (their container-started events) next to raw create+start of the same
// image through the same engine client in the same run, and reports the
// ratio (target <= 1.15).
func BenchmarkFanOut(b *testing.B) {
	for _, n := range []int{8, 32} {
		b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
			d, labels := realBenchEngine(b)
			var orch, raw time.Duration
			for i := 0; i < b.N; i++ {
				raw += rawFanOut(b, d, labels, n, i)
				orch += orchFanOut(b, d, labels, n, i)
			}
			b.ReportMetric(float64(orch.Milliseconds())/float64(b.N), "ms/fanout")
			b.ReportMetric(float64(raw.Milliseconds())/float64(b.N), "ms/raw")
			b.ReportMetric(float64(orch)/float64(raw), "ratio")
		})
	}
}

// rawFanOut creates and starts n containers concurrently, the fastest the
// engine does it, and removes them (untimed).
func rawFanOut(b *testing.B, d *container.Docker, labels map[string]string, n, iter int) time.Duration {
	ctx := context.Background()
	net := "aimi-bench-raw-" + strings.ReplaceAll(labels[dockertest.LabelKey], "-", "")[:12]
	if _, err := d.EnsureNetwork(ctx, net, labels); err != nil {
		b.Fatal(err)
	}
	ids := make([]string, n)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	start := time.Now()
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id, err := d.Create(ctx, engine.Spec{Name: fmt.Sprintf("aimi-braw%s-%d-%d", labels[dockertest.LabelKey][:6], iter, i), Image: standinImage,
				Labels: labels, Network: net, MemoryBytes: 64 << 20, MemorySwapBytes: 64 << 20})
			if err == nil {
				err = d.Start(ctx, id)
			}
			ids[i] = id
			if err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	el := time.Since(start)
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	b.StopTimer()
	for _, id := range ids {
		_ = d.Remove(ctx, id)
	}
	b.StartTimer()
	return el
}

// orchFanOut starts a swarm of n task files with Max n and waits for every
// container-started event; then removes it (untimed).
func orchFanOut(b *testing.B, d *container.Docker, labels map[string]string, n, iter int) time.Duration {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("bf%s-%d-%d", labels[dockertest.LabelKey][:6], iter, i)
	}
	repo, files := testRepo(b, names, 1)
	m, err := New(context.Background(), Config{Image: standinImage, Labels: labels, MemoryBytes: 64 << 20, MemorySwapBytes: 64 << 20,
		StopGrace: time.Second, RunnerEnv: map[string]string{"STANDIN_SCRIPT": "sleep|60s"}, Logger: testLogger(b)}, d)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	evs := m.Subscribe(ctx)
	start := time.Now()
	if _, err := m.Start(ctx, api.StartRequest{RepoPath: repo, TaskFiles: files, Max: n}); err != nil {
		b.Fatal(err)
	}
	started := 0
	for started < n {
		select {
		case e := <-evs:
			if e.Kind == api.EventContainerStarted {
				started++
			}
		case <-ctx.Done():
			b.Fatalf("only %d of %d containers started", started, n)
		}
	}
	el := time.Since(start)
	b.StopTimer()
	sctx, scancel := context.WithTimeout(context.Background(), time.Minute)
	defer scancel()
	_ = m.Shutdown(sctx)
	for _, c := range m.getSwarm(repo).list() {
		_ = d.Remove(sctx, c.id)
	}
	b.StartTimer()
	return el
}

// BenchmarkMessageRate measures messages/s through supervisor + journal +
// state on the fake engine (no Docker): one container floods b.N
// progress-updates (target >= 20,000 msgs/s).
func BenchmarkMessageRate(b *testing.B) {
	repo, files := testRepo(b, []string{"flood"}, 1)
	n := max(b.N, 1000)
	prog := func(ctx context.Context, stdin <-chan []byte, emit func(string), term <-chan struct{}) (int, bool) {
		sid, cid, _ := readRequest(ctx, stdin)
		for i := 0; i < n; i++ {
			emit(msgLine(sid, cid, &acpmsg.ProgressUpdate{StoryID: "US-001", Status: "in_progress", Output: fmt.Sprintf("flood %d", i)}))
		}
		emit(msgLine(sid, cid, &acpmsg.Completion{Status: "completed", Errors: []string{}}))
		return 0, false
	}
	eng := newFakeEngine(func(engine.Spec) program { return prog })
	m, err := New(context.Background(), Config{Image: "standin:test", Logger: testLogger(b)}, eng)
	if err != nil {
		b.Fatal(err)
	}
	defer m.Shutdown(context.Background())
	b.ResetTimer()
	start := time.Now()
	if _, err := m.Start(context.Background(), api.StartRequest{RepoPath: repo, TaskFiles: files}); err != nil {
		b.Fatal(err)
	}
	waitTerminal(b, m, repo, 5*time.Minute)
	el := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(n+1)/el.Seconds(), "msgs/s")
}

// BenchmarkRealMessageRate is the end-to-end rate with the real engine: a
// stand-in container floods 60,000 progress-updates; the rate is taken
// between the first and the last journal record.
func BenchmarkRealMessageRate(b *testing.B) {
	d, labels := realBenchEngine(b)
	// 60,000 lines of ~300 bytes in the json-file log stay within the
	// container package's log retention (3 x 10 MB); more would rotate out
	// before they are read at this pace.
	const n = 60000
	for i := 0; i < b.N; i++ {
		repo, files := testRepo(b, []string{fmt.Sprintf("rflood%s-%d", labels[dockertest.LabelKey][:6], i)}, 1)
		m, err := New(context.Background(), Config{Image: standinImage, Labels: labels, MemoryBytes: 256 << 20, MemorySwapBytes: 256 << 20,
			RunnerEnv: map[string]string{"STANDIN_SCRIPT": fmt.Sprintf("flood|%d|US-001;complete|completed", n)}, Logger: testLogger(b)}, d)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := m.Start(context.Background(), api.StartRequest{RepoPath: repo, TaskFiles: files}); err != nil {
			b.Fatal(err)
		}
		v := waitTerminal(b, m, repo, 5*time.Minute)
		recs := readJournal(b, repo, v.State.SwarmID, v.Containers[0].Name)
		var first, last time.Time
		count := 0
		for _, r := range recs {
			if r.Stream != state.StreamStdout {
				continue
			}
			if first.IsZero() {
				first = r.Time
			}
			last = r.Time
			count++
		}
		if count != n+1 {
			b.Errorf("journaled %d container lines, want %d", count, n+1)
		}
		b.ReportMetric(float64(count)/last.Sub(first).Seconds(), "msgs/s")
		_ = m.Shutdown(context.Background())
		_ = d.Remove(context.Background(), v.Containers[0].ContainerID)
	}
}
