package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/internal/browsertest"
	"github.com/aimi-tools/swarm/state"
)

// BenchmarkScale runs N containers (N = $AIMI_BENCH_SCALE, default 200) of
// the real sandbox image with a 256 MiB limit on the demo agent, whose
// verify command sleeps, so that every container is working and idle at
// once. It reports what a user of that many containers sees: the time until
// all are working, `aimi swarm status --json` latency (p50, p95), the
// daemon's RSS, the engine requests per second per idle container (from the
// daemon's own aimid_engine_requests_total over 30 s), the board in headless
// Chromium (time until every card shows, and the p95 of its updates, from
// the daemon's event to the card drawn, while all N stop at once), and the
// time `stop` and `cleanup` of all of them take. One measurement:
// -benchtime 1x. With $AIMI_BENCH_PROFILES set to a directory it also saves
// the daemon's heap and goroutine profiles there while all are idle.
func BenchmarkScale(b *testing.B) {
	n := 200
	if v, err := strconv.Atoi(os.Getenv("AIMI_BENCH_SCALE")); err == nil && v > 0 {
		n = v
	}
	image := sandboxImage(b)
	actx, _ := browsertest.Start(b)
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("s%03d", i)
	}
	repo := localRepo(b, names...)
	dir := shortDir(b)
	sock := filepath.Join(dir, "aimid.sock")
	metricsAddr := freeLoopbackAddr(b)
	p := launch(b, daemonOpts{
		Sock:     sock,
		DataDir:  filepath.Join(dir, "data"),
		Config:   "agent:\n  kind: demo\n  verify_command: sleep 3600\ngit:\n  mode: local\n",
		LogLevel: "warn",
		Env: []string{
			"AIMI_SANDBOX_IMAGE=" + image, "AIMI_SANDBOX_MEMORY=256m", "AIMI_SANDBOX_SWAP=256m",
			"AIMI_SANDBOX_CPUS=0.5", "AIMI_SWARM_STOP_GRACE=5s", "AIMI_METRICS_LISTEN=" + metricsAddr,
			"AIMI_METRICS_PPROF=" + strconv.FormatBool(os.Getenv("AIMI_BENCH_PROFILES") != ""),
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
	defer cancel()
	b.ResetTimer()
	start := time.Now()
	if code, _, errOut := aimi(ctx, "swarm", "start", "--all", "--local", "--max", strconv.Itoa(n), "--repo", repo, "--socket", sock); code != 0 {
		b.Fatalf("start: exit %d %s", code, errOut)
	}
	waitFor(b, sock, repo, 30*time.Minute, "all containers working", func(v api.SwarmView) bool {
		working := 0
		for _, c := range v.State.Containers {
			if c.Status == state.StatusRunning && c.StoryProgress.InProgress == 1 {
				working++
			}
		}
		return working == n
	})
	b.ReportMetric(time.Since(start).Seconds(), "s-to-all-working")
	b.StopTimer()

	scaleIdle(b, ctx, sock, repo, metricsAddr, n)
	rss, err := vmRSS(p.cmd.Process.Pid)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(rss)/1024, "daemon-RSS-MB")
	if dir := os.Getenv("AIMI_BENCH_PROFILES"); dir != "" {
		saveProfiles(b, metricsAddr, dir)
	}
	page := scaleBoardOpen(b, ctx, actx, sock, n)

	t0 := time.Now()
	if code, _, errOut := aimi(ctx, "swarm", "stop", "--repo", repo, "--socket", sock); code != 0 {
		b.Fatalf("stop: exit %d %s", code, errOut)
	}
	b.ReportMetric(time.Since(t0).Seconds(), "s-stop-all")
	scaleBoardUpdates(b, page, n)
	t0 = time.Now()
	if code, _, errOut := aimi(ctx, "swarm", "cleanup", "--force", "--repo", repo, "--socket", sock); code != 0 {
		b.Fatalf("cleanup: exit %d %s", code, errOut)
	}
	b.ReportMetric(time.Since(t0).Seconds(), "s-cleanup-all")
	b.ReportMetric(float64(n), "containers")
}

// scaleIdle asks for the status at a person's pace for 30 s while all n
// containers are idle, and reports its latency and the engine requests
// the daemon made meanwhile, per container and second.
func scaleIdle(b *testing.B, ctx context.Context, sock, repo, metricsAddr string, n int) {
	b.Helper()
	before := engineRequests(b, metricsAddr)
	const window = 30 * time.Second
	var lat []time.Duration
	deadline := time.Now().Add(window)
	for time.Now().Before(deadline) {
		t0 := time.Now()
		if code, _, errOut := aimi(ctx, "swarm", "status", "--json", "--repo", repo, "--socket", sock); code != 0 {
			b.Fatalf("status: exit %d %s", code, errOut)
		}
		lat = append(lat, time.Since(t0))
		time.Sleep(250 * time.Millisecond) // a person's pace, not a load test
	}
	after := engineRequests(b, metricsAddr)
	b.ReportMetric((after-before)/window.Seconds()/float64(n), "engine-req/s-per-idle-container")
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "status-p50-ms")
	b.ReportMetric(float64(lat[len(lat)*95/100].Microseconds())/1000, "status-p95-ms")
}

// scaleBoardOpen opens the board and reports the time until every one of
// the n cards is drawn; the page stays open to watch the stop.
func scaleBoardOpen(b *testing.B, ctx, actx context.Context, sock string, n int) context.Context {
	b.Helper()
	u, _ := startBoard(b, ctx, sock)
	page, cancelPage := chromedp.NewContext(actx)
	b.Cleanup(cancelPage)
	if err := chromedp.Do(page, chromedp.Navigate("about:blank")); err != nil {
		b.Fatal(err)
	}
	t0 := time.Now()
	cards := fmt.Sprintf(`document.querySelectorAll('[data-container][data-status="running"]').length >= %d`, n)
	err := chromedp.Do(page, chromedp.Navigate(u), chromedp.WaitVisible(chromedp.CSS(`#conn[data-state="live"]`)))
	if err == nil {
		_, err = chromedp.Run(page, chromedp.Poll[bool](cards, chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(2*time.Minute)))
	}
	if err != nil {
		b.Fatalf("open the board with %d cards: %v", n, err)
	}
	b.ReportMetric(time.Since(t0).Seconds(), "s-board-all-cards")
	if _, err := chromedp.Run(page, chromedp.Evaluate[float64](`window.aimiBoard.latencies.length = 0`)); err != nil {
		b.Fatal(err)
	}
	return page
}

// scaleBoardUpdates waits until the open board shows none of the n
// containers running and reports the p95 of the updates it drew meanwhile.
func scaleBoardUpdates(b *testing.B, page context.Context, n int) {
	b.Helper()
	gone := `document.querySelectorAll('[data-container][data-status="running"]').length === 0`
	if _, err := chromedp.Run(page, chromedp.Poll[bool](gone, chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(2*time.Minute))); err != nil {
		b.Fatalf("the board still shows running containers after the stop: %v", err)
	}
	lat, err := chromedp.Run(page, chromedp.Evaluate[[]float64](`window.aimiBoard.latencies.slice()`))
	if err != nil {
		b.Fatal(err)
	}
	if len(lat) < n {
		b.Fatalf("the board drew %d updates for the stop of %d containers", len(lat), n)
	}
	slices.Sort(lat)
	b.ReportMetric(lat[int(float64(len(lat)-1)*0.95)], "board-update-p95-ms")
	b.ReportMetric(float64(len(lat)), "board-updates")
}

// saveProfiles saves the daemon's heap and goroutine profiles into dir.
func saveProfiles(b *testing.B, addr, dir string) {
	b.Helper()
	for _, name := range []string{"heap", "goroutine", "allocs", "heap?debug=1"} {
		resp, err := http.Get("http://" + addr + "/debug/pprof/" + name)
		if err != nil {
			b.Fatalf("profile %s: %v", name, err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			b.Fatalf("profile %s: %d %v", name, resp.StatusCode, err)
		}
		file := name + ".pb.gz"
		if strings.Contains(name, "debug=1") {
			file = strings.ReplaceAll(name, "?debug=1", "") + ".txt" // with the runtime's MemStats
		}
		if err := os.WriteFile(filepath.Join(dir, file), body, 0o644); err != nil {
			b.Fatal(err)
		}
	}
}

// engineRequests is the daemon's count of engine requests, all kinds.
func engineRequests(b *testing.B, addr string) float64 {
	b.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		b.Fatalf("scrape: %v", err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		b.Fatalf("parse the scrape: %v", err)
	}
	var sum float64
	for _, m := range fams["aimid_engine_requests_total"].GetMetric() {
		sum += m.GetCounter().GetValue()
	}
	if sum == 0 {
		b.Fatal("no engine requests counted: is the engine endpoint a unix socket or plain TCP?")
	}
	return sum
}
