package metrics

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// healthTimeout bounds the health check: a daemon whose loops do not answer
// within it is not healthy.
const healthTimeout = 3 * time.Second

// Handler serves /metrics (Prometheus text) and /healthz.
func (m *Metrics) Handler() http.Handler { return m.handler(false) }

// handler is Handler, with Go's runtime profiles under /debug/pprof/ when
// profiles is set.
func (m *Metrics) handler(profiles bool) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{
		ErrorHandling:       promhttp.ContinueOnError,
		MaxRequestsInFlight: 4,
		Timeout:             10 * time.Second,
	}))
	mux.HandleFunc("GET /healthz", m.healthz)
	if profiles {
		mux.HandleFunc("GET /debug/pprof/", pprof.Index)
		mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	}
	return mux
}

func (m *Metrics) healthz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), healthTimeout)
	defer cancel()
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	err := errors.New("the daemon is still starting")
	if m.src != nil {
		err = m.src.Health(ctx)
	}
	if err != nil {
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintf(w, "unhealthy: %v\n", err)
		return
	}
	fmt.Fprintln(w, "ok")
}

// Serve listens on addr and serves Handler (with the runtime profiles when
// profiles is set) until ctx ends. The listener is opened before Serve
// returns its first error, so a bad address stops the daemon at start.
func (m *Metrics) Serve(ctx context.Context, addr string, profiles bool, log *slog.Logger) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics.listen %q: %w (use a free host:port such as 127.0.0.1:9464, or empty to turn metrics off)", addr, err)
	}
	srv := &http.Server{
		Handler:           m.handler(profiles),
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       60 * time.Second,
		MaxHeaderBytes:    16 << 10,
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	log.Info("metrics: serving /metrics and /healthz", "addr", ln.Addr().String(), "pprof", profiles)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics server stopped", "err", err)
		}
	}()
	return func() {
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		srv.Shutdown(sctx)
		<-done
	}, nil
}
