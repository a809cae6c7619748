package dockertest

import (
	"context"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// CountingProxy is an HTTP proxy on a unix socket in front of the engine's
// socket that counts the Engine API requests passing through it. Point a
// daemon at it with DOCKER_HOST=<Host>. Streams (logs with follow, events,
// attach upgrades) pass through and count once, when they are opened.
type CountingProxy struct {
	Host string // DOCKER_HOST value naming the proxy
	mu   sync.Mutex
	byOp map[string]int
}

// Count returns the requests so far, in total and by operation ("GET
// /containers/{id}/logs" and the like; the API version prefix dropped).
func (p *CountingProxy) Count() (total int, byOp map[string]int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	byOp = make(map[string]int, len(p.byOp))
	for k, v := range p.byOp {
		byOp[k] = v
		total += v
	}
	return total, byOp
}

// Delta is what happened between two Count results.
func Delta(before, after map[string]int) []string {
	var out []string
	for k, v := range after {
		if d := v - before[k]; d > 0 {
			out = append(out, k+": "+strconv.Itoa(d))
		}
	}
	sort.Strings(out)
	return out
}

var (
	apiVersion = regexp.MustCompile(`^/v[0-9.]+`)
	// An id or name follows /containers/, /networks/ and the like.
	objectID = regexp.MustCompile(`^(/[a-z]+)/[^/]+(/.*)?$`)
)

// op names a request without its object id.
func op(r *http.Request) string {
	path := apiVersion.ReplaceAllString(r.URL.Path, "")
	if m := objectID.FindStringSubmatch(path); m != nil && m[2] != "" {
		path = m[1] + "/{id}" + m[2]
	} else if m != nil && r.Method == http.MethodDelete {
		path = m[1] + "/{id}"
	}
	return r.Method + " " + path
}

// NewCountingProxy serves the proxy in dir (a short directory: unix socket
// paths are limited to 108 bytes) until the test ends.
func NewCountingProxy(t testing.TB, dir string) *CountingProxy {
	t.Helper()
	cli := Client(t)
	engine := strings.TrimPrefix(cli.DaemonHost(), "unix://")
	if engine == cli.DaemonHost() {
		t.Skipf("the engine is at %s; the counting proxy fronts a unix socket only", engine)
	}
	sock := filepath.Join(dir, "docker.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	p := &CountingProxy{Host: "unix://" + sock, byOp: map[string]int{}}
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.Out.URL.Scheme, r.Out.URL.Host = "http", "docker"
		},
		Transport: &http.Transport{
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, "unix", engine)
			},
			MaxIdleConnsPerHost: 64,
		},
		FlushInterval: -1, // streams (logs, events) as they come
		// Streams the daemon ends (a follow it no longer needs) are not
		// errors worth a line each.
		ErrorLog: log.New(io.Discard, "", 0),
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		p.byOp[op(r)]++
		p.mu.Unlock()
		rp.ServeHTTP(w, r)
	})}
	go srv.Serve(l)
	t.Cleanup(func() {
		srv.Close()
		os.Remove(sock)
	})
	return p
}
