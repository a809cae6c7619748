package main

import (
	"compress/gzip"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// gzipped wraps a fake provider's handler: its answer is gzipped, as the
// providers do, when the request accepts gzip, or whatever it asked when
// regardless(the answer's Content-Type) is true (a provider may compress
// anyway). Streamed answers stay streamed: each flush of the handler
// flushes the gzip stream.
func gzipped(h http.Handler, regardless func(contentType string) bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Add("Vary", "Accept-Encoding")
		g := &gzipWriter{ResponseWriter: w, asked: strings.Contains(r.Header.Get("Accept-Encoding"), "gzip"), regardless: regardless}
		h.ServeHTTP(g, r)
		if g.gz != nil {
			if err := g.gz.Close(); err != nil {
				panic(fmt.Sprintf("fake provider: gzip: %v", err))
			}
		}
	})
}

// gzipWriter decides at the answer's header whether to gzip its body.
type gzipWriter struct {
	http.ResponseWriter
	asked, decided bool
	regardless     func(string) bool
	gz             *gzip.Writer
}

func (g *gzipWriter) WriteHeader(code int) {
	if !g.decided {
		g.decided = true
		if g.asked || g.regardless(g.Header().Get("Content-Type")) {
			g.Header().Set("Content-Encoding", "gzip")
			g.Header().Del("Content-Length")
			g.gz = gzip.NewWriter(g.ResponseWriter)
		}
	}
	g.ResponseWriter.WriteHeader(code)
}

func (g *gzipWriter) Write(p []byte) (int, error) {
	if !g.decided {
		g.WriteHeader(http.StatusOK)
	}
	if g.gz == nil {
		return g.ResponseWriter.Write(p)
	}
	return g.gz.Write(p)
}

func (g *gzipWriter) Flush() {
	if g.gz != nil {
		g.gz.Flush()
	}
	g.ResponseWriter.(http.Flusher).Flush()
}

// TestGzippedAnswersAreMetered: the real daemon and engine, a sandbox
// whose client (Go's, as Python's httpx and Node's fetch) sends
// Accept-Encoding: gzip, and a fake provider that gzips its JSON answer
// when asked and its SSE stream whatever it was asked. `aimi swarm usage`
// reports the provider's tokens and their cost, as for plain answers.
func TestGzippedAnswersAreMetered(t *testing.T) {
	parallel(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	up := httptest.NewServer(gzipped(http.HandlerFunc(usageAnswers), func(ct string) bool { return ct == "text/event-stream" }))
	t.Cleanup(up.Close)
	runCallagent(t, ctx, up)
}

// TestBudgetStopsOnGzippedAnswers: the real daemon, engine and runner; the
// agent's client (git, which sends Accept-Encoding: deflate, gzip, br,
// zstd) calls a fake provider that gzips when asked. The swarm's budget
// is reached by the first story as with plain answers: the container
// stops with BUDGET_EXCEEDED and the figures.
func TestBudgetStopsOnGzippedAnswers(t *testing.T) {
	parallelLong(t)
	if testing.Short() {
		t.Skip("builds the sandbox image and runs real containers")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	b := startBudgetSwarmServing(t, ctx, budgetConfig("2", "0"), nil, func(h http.Handler) http.Handler {
		return gzipped(h, func(string) bool { return false })
	})
	defer b.p.stop(t)
	b.stopsAfterTheFirstStory(t, func(calls int32) string {
		return fmt.Sprintf("BUDGET_EXCEEDED: the swarm spent %.4f of its budget 2.0000 (swarm.budget", 3*float64(calls))
	})
}
