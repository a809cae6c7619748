// Package daemontest serves the daemon's API from a hand-written fake of the
// orchestrator, for tests of the daemon's HTTP layer and of the CLI: a real
// daemon.Server on a real unix socket, with every swarm answer scripted.
package daemontest

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/daemon"
	"github.com/aimi-tools/swarm/state"
)

// Swarms is a fake daemon.Swarms: each method calls its func field when set,
// or answers View(repo) (an empty cleanup report, an empty journal). Events
// sent on Events reach every subscriber's stream.
type Swarms struct {
	StartFunc   func(api.StartRequest) (api.SwarmView, error)
	StatusFunc  func(repo string) (api.SwarmView, error)
	ListFunc    func() []api.SwarmView
	StopFunc    func(repo string, names []string) (api.SwarmView, error)
	ResumeFunc  func(repo string, retryFailed bool) (api.SwarmView, error)
	CleanupFunc func(repo string, force bool) (api.CleanupReport, error)
	FetchFunc   func(repo string, names []string) (api.FetchReport, error)
	JournalFunc func(ctx context.Context, req api.LogsRequest) (<-chan state.Record, error)
	Events      chan api.Event

	mu    sync.Mutex
	calls []string
}

// SwarmID is the id of View's swarm.
const SwarmID = "6f1c2d3e-1a2b-4c3d-8e9f-0a1b2c3d4e5f"

// View is a swarm view with no containers.
func View(repo string) api.SwarmView {
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	return api.SwarmView{RepoPath: repo, State: &state.Swarm{SwarmID: SwarmID, CreatedAt: now, UpdatedAt: now}}
}

func (f *Swarms) record(c string) {
	f.mu.Lock()
	f.calls = append(f.calls, c)
	f.mu.Unlock()
}

// Calls lists the methods called so far, in order.
func (f *Swarms) Calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

func (f *Swarms) Start(_ context.Context, req api.StartRequest) (api.SwarmView, error) {
	f.record("start")
	if f.StartFunc != nil {
		return f.StartFunc(req)
	}
	return View(req.RepoPath), nil
}

func (f *Swarms) Status(_ context.Context, repo string) (api.SwarmView, error) {
	f.record("status")
	if f.StatusFunc != nil {
		return f.StatusFunc(repo)
	}
	return View(repo), nil
}

func (f *Swarms) List(context.Context) []api.SwarmView {
	f.record("list")
	if f.ListFunc != nil {
		return f.ListFunc()
	}
	return nil
}

func (f *Swarms) Stop(_ context.Context, repo string, names []string) (api.SwarmView, error) {
	f.record("stop")
	if f.StopFunc != nil {
		return f.StopFunc(repo, names)
	}
	return View(repo), nil
}

func (f *Swarms) Resume(_ context.Context, repo string, retry bool) (api.SwarmView, error) {
	f.record("resume")
	if f.ResumeFunc != nil {
		return f.ResumeFunc(repo, retry)
	}
	return View(repo), nil
}

func (f *Swarms) Cleanup(_ context.Context, repo string, force bool) (api.CleanupReport, error) {
	f.record("cleanup")
	if f.CleanupFunc != nil {
		return f.CleanupFunc(repo, force)
	}
	return api.CleanupReport{RepoPath: repo}, nil
}

func (f *Swarms) Fetch(_ context.Context, repo string, names []string) (api.FetchReport, error) {
	f.record("fetch")
	if f.FetchFunc != nil {
		return f.FetchFunc(repo, names)
	}
	return api.FetchReport{RepoPath: repo, Fetched: []api.Fetched{}, Skipped: []api.Kept{}}, nil
}

func (f *Swarms) Journal(ctx context.Context, req api.LogsRequest) (<-chan state.Record, error) {
	f.record("journal")
	if f.JournalFunc != nil {
		return f.JournalFunc(ctx, req)
	}
	ch := make(chan state.Record)
	close(ch)
	return ch, nil
}

// Subscribe forwards f.Events until ctx ends (a nil Events never sends).
func (f *Swarms) Subscribe(ctx context.Context) <-chan api.Event {
	f.record("subscribe")
	out := make(chan api.Event)
	go func() {
		defer close(out)
		for {
			select {
			case <-ctx.Done():
				return
			case e, ok := <-f.Events:
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

// ShortTempDir is a temp dir with a short path: unix socket paths are
// limited to 108 bytes, and t.TempDir() embeds the test name.
func ShortTempDir(t testing.TB) string {
	t.Helper()
	d, err := os.MkdirTemp("", "aimid")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// Serve runs a daemon.Server for sw on a fresh socket until the test ends
// and returns the socket path and the server.
func Serve(t testing.TB, sw daemon.Swarms, opts ...func(*daemon.ServerOptions)) (string, *daemon.Server) {
	t.Helper()
	sock := filepath.Join(ShortTempDir(t), "run", "aimid.sock")
	ln, err := daemon.Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	o := daemon.ServerOptions{Swarms: sw, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Version: "test"}
	for _, f := range opts {
		f(&o)
	}
	srv := daemon.NewServer(o)
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
		ln.Release()
	})
	return sock, srv
}
