package orchestrator

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/cli"
	"github.com/aimi-tools/swarm/daemon"
	"github.com/aimi-tools/swarm/daemon/daemontest"
	"github.com/aimi-tools/swarm/state"
)

// BenchmarkStatus measures one `aimi swarm status --json` with n idle
// working containers, without an engine: the Manager over the fake engine,
// the daemon's real handler on a unix socket, and the CLI's command
// (decode, print). The sub-benchmarks split the path: the Manager's
// answer alone, the client's call through the socket, the whole command.
// BenchmarkScale measures the same call against real containers on a
// loaded machine; this one says where the time of one call goes.
func BenchmarkStatus(b *testing.B) {
	for _, n := range []int{200} {
		b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
			m, repo := idleSwarm(b, n)
			sock, _ := daemontest.Serve(b, m)
			ctx := context.Background()
			b.Run("manager", func(b *testing.B) {
				b.ReportAllocs()
				for i := 0; i < b.N; i++ {
					if _, err := m.Status(ctx, repo); err != nil {
						b.Fatal(err)
					}
				}
			})
			view, err := m.Status(ctx, repo)
			if err != nil {
				b.Fatal(err)
			}
			body, err := json.Marshal(view)
			if err != nil {
				b.Fatal(err)
			}
			b.Run("encode", func(b *testing.B) {
				b.ReportAllocs()
				b.ReportMetric(float64(len(body)), "bytes")
				for i := 0; i < b.N; i++ {
					if _, err := json.Marshal(view); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run("decode", func(b *testing.B) {
				b.ReportAllocs()
				for i := 0; i < b.N; i++ {
					var v api.SwarmView
					if err := json.Unmarshal(body, &v); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run("client", func(b *testing.B) {
				c := daemon.NewClient(sock)
				defer c.Close()
				b.ReportAllocs()
				for i := 0; i < b.N; i++ {
					if _, err := c.Status(ctx, repo); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run("cli-json", func(b *testing.B) { benchStatusCmd(b, sock, repo, "--json") })
			b.Run("cli-table", func(b *testing.B) { benchStatusCmd(b, sock, repo) })
			if bin := os.Getenv(envStatusBin); bin != "" {
				b.Run("binary-json", func(b *testing.B) { benchStatusBinary(b, bin, sock, repo) })
			}
		})
	}
}

// envStatusBin names a built aimi binary for BenchmarkStatus to run as a
// process too (go build -o /tmp/aimi ./cmd/aimi), start-up included.
const envStatusBin = "AIMI_BENCH_STATUS_BIN"

// benchStatusBinary runs `aimi swarm status --json` as a process.
func benchStatusBinary(b *testing.B, bin, sock, repo string) {
	lat := make([]time.Duration, 0, b.N)
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		if out, err := exec.Command(bin, "swarm", "status", "--json", "--repo", repo, "--socket", sock).CombinedOutput(); err != nil {
			b.Fatalf("status: %v\n%.500s", err, out)
		}
		lat = append(lat, time.Since(t0))
	}
	reportPercentiles(b, lat)
}

// reportPercentiles reports the p50 and p95 of lat, as BenchmarkScale
// does for the same command.
func reportPercentiles(b *testing.B, lat []time.Duration) {
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*95/100].Microseconds())/1000, "p95-ms")
}

// benchStatusCmd runs `aimi swarm status` with extra args as the aimi
// binary does, a fresh client per call.
func benchStatusCmd(b *testing.B, sock, repo string, extra ...string) {
	args := append([]string{"swarm", "status", "--repo", repo, "--socket", sock}, extra...)
	var errb strings.Builder
	s := cli.Streams{In: strings.NewReader(""), Out: io.Discard, Err: &errb}
	b.ReportAllocs()
	lat := make([]time.Duration, 0, b.N)
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		if code := cli.Run(context.Background(), args, s); code != 0 {
			b.Fatalf("status: exit %d: %s", code, errb.String())
		}
		lat = append(lat, time.Since(t0))
	}
	reportPercentiles(b, lat)
}

// idleSwarm starts n containers that each report their one story in
// progress and then wait to be stopped, and returns once all are working.
func idleSwarm(b *testing.B, n int) (*Manager, string) {
	b.Helper()
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("s%03d", i)
	}
	repo, files := testRepo(b, names, 1)
	eng := newFakeEngine(byTask(nil, scripted(0, step{story: "US-001", status: "in_progress"}, step{hang: true})))
	ctx, cancel := context.WithCancel(context.Background())
	m, err := New(ctx, Config{Image: "standin:test", Logger: testLogger(b)}, eng)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		sctx, scancel := context.WithTimeout(context.Background(), time.Minute)
		defer scancel()
		_ = m.Shutdown(sctx)
		cancel()
	})
	if _, err := m.Start(ctx, api.StartRequest{RepoPath: repo, TaskFiles: files, Max: n}); err != nil {
		b.Fatal(err)
	}
	working := func() bool {
		v, err := m.Status(ctx, repo)
		if err != nil {
			b.Fatal(err)
		}
		k := 0
		for _, c := range v.State.Containers {
			if c.Status == state.StatusRunning && c.StoryProgress.InProgress == 1 {
				k++
			}
		}
		return k == n
	}
	if !waitUntil(2*time.Minute, working) {
		b.Fatalf("not all %d containers working after 2 minutes", n)
	}
	return m, repo
}
