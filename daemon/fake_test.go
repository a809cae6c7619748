package daemon

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/orchestrator"
	"github.com/aimi-tools/swarm/state"
)

// fakeSwarms is a hand-written Swarms: each method calls its func field, or
// answers a fixed view.
type fakeSwarms struct {
	mu       sync.Mutex
	calls    []string
	start    func(orchestrator.StartRequest) (orchestrator.SwarmView, error)
	status   func(string) (orchestrator.SwarmView, error)
	stop     func(string, []string) (orchestrator.SwarmView, error)
	resume   func(string, bool) (orchestrator.SwarmView, error)
	cleanup  func(string, bool) (orchestrator.CleanupReport, error)
	journal  func(ctx context.Context, repo, name string, follow bool) (<-chan state.Record, error)
	eventsCh chan orchestrator.Event
}

func (f *fakeSwarms) record(c string) {
	f.mu.Lock()
	f.calls = append(f.calls, c)
	f.mu.Unlock()
}

func (f *fakeSwarms) Calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

func view(repo string) orchestrator.SwarmView {
	return orchestrator.SwarmView{RepoPath: repo, State: &state.Swarm{SwarmID: "6f1c2d3e-1a2b-4c3d-8e9f-0a1b2c3d4e5f"}}
}

func (f *fakeSwarms) Start(_ context.Context, req orchestrator.StartRequest) (orchestrator.SwarmView, error) {
	f.record("start")
	if f.start != nil {
		return f.start(req)
	}
	return view(req.RepoPath), nil
}

func (f *fakeSwarms) Status(_ context.Context, repo string) (orchestrator.SwarmView, error) {
	f.record("status")
	if f.status != nil {
		return f.status(repo)
	}
	return view(repo), nil
}

func (f *fakeSwarms) Stop(_ context.Context, repo string, names []string) (orchestrator.SwarmView, error) {
	f.record("stop")
	if f.stop != nil {
		return f.stop(repo, names)
	}
	return view(repo), nil
}

func (f *fakeSwarms) Resume(_ context.Context, repo string, retry bool) (orchestrator.SwarmView, error) {
	f.record("resume")
	if f.resume != nil {
		return f.resume(repo, retry)
	}
	return view(repo), nil
}

func (f *fakeSwarms) Cleanup(_ context.Context, repo string, force bool) (orchestrator.CleanupReport, error) {
	f.record("cleanup")
	if f.cleanup != nil {
		return f.cleanup(repo, force)
	}
	return orchestrator.CleanupReport{RepoPath: repo}, nil
}

func (f *fakeSwarms) Journal(ctx context.Context, repo, name string, follow bool) (<-chan state.Record, error) {
	f.record("journal")
	if f.journal != nil {
		return f.journal(ctx, repo, name, follow)
	}
	ch := make(chan state.Record)
	close(ch)
	return ch, nil
}

func (f *fakeSwarms) Subscribe(ctx context.Context) <-chan orchestrator.Event {
	f.record("subscribe")
	out := make(chan orchestrator.Event)
	go func() {
		defer close(out)
		for {
			select {
			case <-ctx.Done():
				return
			case e, ok := <-f.eventsCh:
				if !ok {
					return
				}
				select {
				case out <- e:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	return out
}

// shortTempDir is a temp dir with a short path: unix socket paths are
// limited to 108 bytes, and t.TempDir() embeds the test name.
func shortTempDir(t testing.TB) string {
	t.Helper()
	d, err := os.MkdirTemp("", "aimid")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// serve runs a Server on a fresh socket and returns a Client for it.
func serve(t testing.TB, sw Swarms, opts ...func(*ServerOptions)) (*Client, *Server, string) {
	t.Helper()
	sock := filepath.Join(shortTempDir(t), "run", "aimid.sock")
	ln, err := Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	o := ServerOptions{Swarms: sw, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Version: "test"}
	for _, f := range opts {
		f(&o)
	}
	srv := NewServer(o)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
		ln.Close()
	})
	c := NewClient(sock)
	t.Cleanup(c.Close)
	return c, srv, sock
}
