package gateway

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/usage"
)

// meterObserver meters every answer as the daemon's usage observer does.
type meterObserver struct{}

type meterTap struct{ m *usage.Meter }

func (meterObserver) Begin(c *Call) Tap {
	return &meterTap{usage.NewMeter(c.Header.Get("Content-Type"))}
}
func (t *meterTap) Body(p []byte) { t.m.Write(p) }
func (t *meterTap) End(*Call)     { _ = t.m.Usage() }

// BenchmarkGatewayAddedLatency measures what the gateway adds to a model
// call: the same JSON call, one at a time over kept-alive connections, to
// a fake provider directly and through the gateway (TLS, placeholder
// check, key swap, the usage meter). It reports the added p50 and p99.
func BenchmarkGatewayAddedLatency(b *testing.B) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"type":"message","content":[{"type":"text","text":"hello"}],"usage":{"input_tokens":3,"output_tokens":1}}`)
	}))
	defer up.Close()
	provs := Builtin()
	a := provs["anthropic"]
	a.URL, _ = ParseURL(up.URL)
	provs["anthropic"] = a
	dir := b.TempDir()
	s, err := New(Options{DataDir: filepath.Join(dir, "gateway"), CADir: filepath.Join(dir, "ca"), Providers: provs,
		Keys: map[string]string{"ANTHROPIC_API_KEY": realKey}, Observer: meterObserver{}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	if err := s.ListenOn(context.Background(), "127.0.0.1"); err != nil {
		b.Fatal(err)
	}
	g, err := s.Grant(contract.Sandbox{Swarm: "sw1", Container: "aimi-bench"}, "127.0.0.1")
	if err != nil {
		b.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(s.ca.CertPEM)
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.1")}}
	viaGW := &http.Client{Transport: &http.Transport{DialContext: d.DialContext, TLSClientConfig: &tls.Config{RootCAs: pool}}}
	direct := &http.Client{}
	call := func(c *http.Client, base, key string) time.Duration {
		req, _ := http.NewRequest(http.MethodPost, base+"/v1/messages", strings.NewReader(`{"model":"m","max_tokens":5,"messages":[]}`))
		req.Header.Set("X-Api-Key", key)
		req.Header.Set("Content-Type", "application/json")
		start := time.Now()
		resp, err := c.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			b.Fatalf("status %d", resp.StatusCode)
		}
		return time.Since(start)
	}
	const warm, n = 50, 2000
	var dt, gt []time.Duration
	for b.Loop() {
		dt, gt = dt[:0], gt[:0]
		for i := range warm + n {
			// Alternate, so that load on the machine hits both alike.
			x, y := call(direct, up.URL, realKey), call(viaGW, g.Env["ANTHROPIC_BASE_URL"], g.Env["ANTHROPIC_API_KEY"])
			if i >= warm {
				dt, gt = append(dt, x), append(gt, y)
			}
		}
	}
	pct := func(v []time.Duration, p float64) float64 {
		s := slices.Clone(v)
		slices.Sort(s)
		return float64(s[min(len(s)-1, int(p*float64(len(s))))]) / float64(time.Millisecond)
	}
	b.ReportMetric(pct(dt, 0.5), "direct-p50-ms")
	b.ReportMetric(pct(gt, 0.5), "gateway-p50-ms")
	b.ReportMetric(pct(gt, 0.5)-pct(dt, 0.5), "added-p50-ms")
	b.ReportMetric(pct(gt, 0.99)-pct(dt, 0.99), "added-p99-ms")
}
