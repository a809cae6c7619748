package cli

import (
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/daemon/daemontest"
)

var boardURLRe = regexp.MustCompile(`board: (http://127\.0\.0\.1:\d+/\?token=[A-Za-z0-9_-]{43})\n`)

func TestSwarmUIServesTheBoardUntilInterrupted(t *testing.T) {
	fake := &daemontest.Swarms{ListFunc: func() []api.SwarmView { return []api.SwarmView{daemontest.View("/repo")} }}
	sock, _ := daemontest.Serve(t, fake)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := &syncBuffer{}
	done := make(chan result, 1)
	go func() { done <- runAimi(ctx, nil, out, "swarm", "ui", "--socket", sock, "--no-open") }()
	var u string
	for deadline := time.Now().Add(10 * time.Second); u == ""; {
		if m := boardURLRe.FindStringSubmatch(out.String()); m != nil {
			u = m[1]
		} else if time.Now().After(deadline) {
			t.Fatalf("no board URL printed: %q", out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar}
	resp, err := c.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	base := strings.SplitN(u, "/?", 2)[0]
	resp, err = c.Get(base + "/api/swarms")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"repo":"/repo"`) {
		t.Fatalf("swarms through the board: %d %s", resp.StatusCode, body)
	}
	resp, err = http.Get(base + "/api/swarms") // no cookie
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("without the token: %d, want 403", resp.StatusCode)
	}
	cancel()
	select {
	case r := <-done:
		if r.code != 0 {
			t.Errorf("ui after Ctrl-C: exit %d %s", r.code, r.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("ui did not stop when interrupted")
	}
}

func TestSwarmUIRefusesANonLoopbackAddressAndAMissingDaemon(t *testing.T) {
	sock, _ := daemontest.Serve(t, &daemontest.Swarms{})
	if r := runAimi(context.Background(), nil, nil, "swarm", "ui", "--socket", sock, "--no-open", "--listen", "0.0.0.0:0"); r.code != ExitUsage || !strings.Contains(r.err, "loopback") {
		t.Errorf("--listen 0.0.0.0:0: exit %d %q, want %d and a loopback-only message", r.code, r.err, ExitUsage)
	}
	missing := filepath.Join(daemontest.ShortTempDir(t), "none.sock")
	if r := runAimi(context.Background(), nil, nil, "swarm", "ui", "--socket", missing, "--no-open"); r.code != ExitDaemon {
		t.Errorf("no daemon: exit %d %q, want %d", r.code, r.err, ExitDaemon)
	}
}
