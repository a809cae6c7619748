package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/aimi-tools/swarm/api"
)

// freeLoopbackAddr is a loopback address with a port nothing listens on
// (the moment it was asked).
func freeLoopbackAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// scrape reads the daemon's /metrics with the Prometheus text parser.
func scrape(t *testing.T, addr string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatalf("scrape: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("scrape: %s", resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse the scrape as Prometheus text: %v", err)
	}
	return fams
}

// value is the sample of family name whose labels include want (0 when
// there is none).
func value(fams map[string]*dto.MetricFamily, name string, want map[string]string) float64 {
	f := fams[name]
	if f == nil {
		return 0
	}
	var sum float64
next:
	for _, m := range f.GetMetric() {
		for k, v := range want {
			found := false
			for _, l := range m.GetLabel() {
				if l.GetName() == k && l.GetValue() == v {
					found = true
				}
			}
			if !found {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			sum += m.GetCounter().GetValue()
		case m.Gauge != nil:
			sum += m.GetGauge().GetValue()
		case m.Histogram != nil:
			sum += float64(m.GetHistogram().GetSampleCount())
		}
	}
	return sum
}

// TestMetricsCountWhatTheDaemonDid runs a small swarm through the real
// daemon and engine with metrics.listen set, scrapes /metrics with the
// Prometheus text parser, and checks each count against what the daemon
// did: containers and stories by status, messages journaled and refused,
// the journals' bytes, engine requests and state saves; /healthz answers.
func TestMetricsCountWhatTheDaemonDid(t *testing.T) {
	parallel(t)
	image := standinImage(t)
	repo := gitRepo(t, 2, "alpha", "beta")
	dir := shortDir(t)
	sock := filepath.Join(dir, "aimid.sock")
	addr := freeLoopbackAddr(t)
	launch(t, daemonOpts{
		Sock:    sock,
		DataDir: filepath.Join(dir, "data"),
		Image:   image,
		Scripts: map[string]string{
			"STANDIN_SCRIPT": "pace|20ms;raw|not a message;auto|2",
		},
		Env: []string{"AIMI_METRICS_LISTEN=" + addr},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	resp, err := http.Get("http://" + addr + "/healthz")
	if err != nil {
		t.Fatalf("healthz: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || strings.TrimSpace(string(body)) != "ok" {
		t.Fatalf("healthz: %s %q", resp.Status, body)
	}

	if code, out, errOut := aimi(ctx, "swarm", "start", "--all", "--follow", "--repo", repo, "--socket", sock); code != 0 {
		t.Fatalf("start --follow: exit %d\n%s\n%s", code, out, errOut)
	}
	sw := waitFor(t, sock, repo, time.Minute, "both containers finished", func(v api.SwarmView) bool {
		for _, c := range v.Containers {
			if !c.Finished {
				return false
			}
		}
		return len(v.Containers) == 2
	})
	fams := scrape(t, addr)
	checks := []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"aimid_swarms", nil, 1},
		{"aimid_containers", map[string]string{"status": "completed"}, 2},
		{"aimid_containers", map[string]string{"status": "running"}, 0},
		{"aimid_stories", map[string]string{"status": "completed"}, 4},
		// Per container: two stories in progress then completed, one
		// completion, and one line that is no message.
		{"aimid_messages_total", map[string]string{"result": "journaled", "type": "progress-update"}, 8},
		{"aimid_messages_total", map[string]string{"result": "journaled", "type": "completion"}, 2},
		{"aimid_messages_total", map[string]string{"result": "invalid"}, 2},
		{"aimid_engine_requests_total", map[string]string{"kind": "POST containers/create"}, 2},
		{"aimid_engine_requests_total", map[string]string{"kind": "POST containers/{id}/start"}, 2},
	}
	for _, c := range checks {
		if got := value(fams, c.name, c.labels); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	if n := value(fams, "aimid_state_save_lag_seconds", nil); n < 1 {
		t.Errorf("aimid_state_save_lag_seconds counts %v saves", n)
	}
	var journals int64
	for _, c := range sw.State.Containers {
		fi, err := os.Stat(filepath.Join(repo, ".aimi", "swarm", sw.State.SwarmID, c.ContainerName+".ndjson"))
		if err != nil {
			t.Fatal(err)
		}
		journals += fi.Size()
	}
	if got := value(fams, "aimid_journal_bytes_total", nil); int64(got) != journals {
		t.Errorf("aimid_journal_bytes_total = %v, the journals hold %d bytes", got, journals)
	}
	if value(fams, "process_resident_memory_bytes", nil) <= 0 {
		t.Error("no process metrics")
	}
}
