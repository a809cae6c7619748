package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/state"
)

// BenchmarkDaemonRSS runs a real aimid (the built binary) with N stand-in
// containers running at once (N = $AIMI_BENCH_CONTAINERS, default 50) and
// reports the daemon's resident memory once all are running (target: under
// 60 MB at 50), plus the time from `start` to all running. It is one
// measurement, not a loop: run it with -benchtime=1x, e.g.
//
//	go test -run '^$' -bench DaemonRSS -benchtime=1x ./cmd/aimid
func BenchmarkDaemonRSS(b *testing.B) {
	n := 50
	if v, err := strconv.Atoi(os.Getenv("AIMI_BENCH_CONTAINERS")); err == nil && v > 0 {
		n = v
	}
	image := standinImage(b)
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("c%03d", i)
	}
	repo := gitRepo(b, 2, names...)
	dir := shortDir(b)
	sock := filepath.Join(dir, "aimid.sock")
	// Each container reports once, then idles long enough to be measured.
	p := launch(b, daemonOpts{
		Sock:    sock,
		DataDir: filepath.Join(dir, "data"),
		Image:   image,
		Scripts: map[string]string{
			"STANDIN_SCRIPT": "progress|US-001|in_progress|working;sleep|10m",
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	b.ResetTimer()
	start := time.Now()
	if code, _, errOut := aimi(ctx, "swarm", "start", "--all", "--max", strconv.Itoa(n), "--repo", repo, "--socket", sock); code != 0 {
		b.Fatalf("start: exit %d %s", code, errOut)
	}
	waitFor(b, sock, repo, 10*time.Minute, "all containers running", func(v api.SwarmView) bool {
		running := 0
		for _, c := range v.State.Containers {
			if c.Status == state.StatusRunning && c.StoryProgress.InProgress == 1 {
				running++
			}
		}
		return running == n
	})
	b.ReportMetric(time.Since(start).Seconds(), "s-to-all-running")
	b.StopTimer()
	rss, err := vmRSS(p.cmd.Process.Pid)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(rss)/1024, "daemon-RSS-MB")
	b.ReportMetric(float64(n), "containers")
	if code, _, errOut := aimi(ctx, "swarm", "stop", "--repo", repo, "--socket", sock); code != 0 {
		b.Errorf("stop: exit %d %s", code, errOut)
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	<-p.done
}

// vmRSS reads a process's resident set size in KiB.
func vmRSS(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			return strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		}
	}
	return 0, fmt.Errorf("no VmRSS in /proc/%d/status", pid)
}
