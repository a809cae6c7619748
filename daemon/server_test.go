package daemon_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/daemon"
	"github.com/aimi-tools/swarm/daemon/daemontest"
	"github.com/aimi-tools/swarm/internal/testwait"
	"github.com/aimi-tools/swarm/state"
)

// rawCall sends a raw HTTP request over the socket, for cases the typed
// client cannot produce (bad bodies, unknown routes).
// serve runs a server for sw and returns a client, the server and the socket.
func serve(t *testing.T, sw daemon.Swarms, opts ...func(*daemon.ServerOptions)) (*daemon.Client, *daemon.Server, string) {
	t.Helper()
	sock, srv := daemontest.Serve(t, sw, opts...)
	c := daemon.NewClient(sock)
	t.Cleanup(c.Close)
	return c, srv, sock
}

var (
	shortTempDir = daemontest.ShortTempDir
	view         = daemontest.View
)

func unixHTTP(sock string) *http.Client {
	return &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
}

func rawCall(t *testing.T, sock, method, path, body string) (int, api.ErrorBody) {
	t.Helper()
	hc := unixHTTP(sock)
	defer hc.CloseIdleConnections()
	req, _ := http.NewRequest(method, "http://aimid"+path, strings.NewReader(body))
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var eb api.ErrorBody
	data, _ := io.ReadAll(resp.Body)
	_ = json.Unmarshal(data, &eb)
	return resp.StatusCode, eb
}

func TestHealthAnswersWithThePID(t *testing.T) {
	c, _, _ := serve(t, &daemontest.Swarms{})
	h, err := c.Health(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if h.Status != "ok" || h.PID != os.Getpid() || h.Version != "test" {
		t.Fatalf("health = %+v", h)
	}
}

func TestRequestsReachTheSwarmsWithTheirArguments(t *testing.T) {
	repo := shortTempDir(t)
	var gotStart api.StartRequest
	var gotStop []string
	var gotRetry, gotForce bool
	fake := &daemontest.Swarms{
		StartFunc: func(r api.StartRequest) (api.SwarmView, error) {
			gotStart = r
			return view(r.RepoPath), nil
		},
		StopFunc: func(_ string, n []string) (api.SwarmView, error) {
			gotStop = n
			return view(repo), nil
		},
		ResumeFunc: func(_ string, r bool) (api.SwarmView, error) { gotRetry = r; return view(repo), nil },
		CleanupFunc: func(_ string, f bool) (api.CleanupReport, error) {
			gotForce = f
			return api.CleanupReport{RepoPath: repo, Removed: []string{"aimi-a"}}, nil
		},
	}
	c, _, _ := serve(t, fake)
	ctx := context.Background()
	req := api.StartRequest{RepoPath: repo, TaskFiles: []string{".aimi/tasks/a-tasks.json"}, Max: 2, Append: true, Local: true, Image: "img:1"}
	v, err := c.Start(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if v.RepoPath != repo || v.State.SwarmID == "" {
		t.Errorf("start view = %+v", v)
	}
	if fmt.Sprint(gotStart) != fmt.Sprint(req) {
		t.Errorf("start request = %+v, want %+v", gotStart, req)
	}
	if _, err := c.Status(ctx, repo); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Stop(ctx, repo, []string{"aimi-a", "aimi-b"}); err != nil || strings.Join(gotStop, ",") != "aimi-a,aimi-b" {
		t.Errorf("stop: %v %v", err, gotStop)
	}
	if _, err := c.Resume(ctx, repo, true); err != nil || !gotRetry {
		t.Errorf("resume: %v retry=%v", err, gotRetry)
	}
	rep, err := c.Cleanup(ctx, repo, true)
	if err != nil || !gotForce || len(rep.Removed) != 1 {
		t.Errorf("cleanup: %v force=%v %+v", err, gotForce, rep)
	}
	if got := strings.Join(fake.Calls(), " "); got != "start status stop resume cleanup" {
		t.Errorf("calls = %s", got)
	}
}

func TestInvalidInputIsRefusedWith400NamingTheField(t *testing.T) {
	repo := shortTempDir(t)
	file := filepath.Join(repo, "f")
	os.WriteFile(file, nil, 0o644)
	start := func(r api.StartRequest) string { b, _ := json.Marshal(r); return string(b) }
	tf := []string{".aimi/tasks/a-tasks.json"}
	tests := []struct {
		name, method, path, body, field string
	}{
		{"start without repo", "POST", "/v1/swarms/start", start(api.StartRequest{TaskFiles: tf}), "repoPath"},
		{"start with relative repo", "POST", "/v1/swarms/start", start(api.StartRequest{RepoPath: "repo", TaskFiles: tf}), "repoPath"},
		{"start with unclean repo", "POST", "/v1/swarms/start", start(api.StartRequest{RepoPath: repo + "/../x", TaskFiles: tf}), "repoPath"},
		{"start with missing repo", "POST", "/v1/swarms/start", start(api.StartRequest{RepoPath: repo + "/nope", TaskFiles: tf}), "repoPath"},
		{"start with a file as repo", "POST", "/v1/swarms/start", start(api.StartRequest{RepoPath: file, TaskFiles: tf}), "repoPath"},
		{"start without task files", "POST", "/v1/swarms/start", start(api.StartRequest{RepoPath: repo}), "taskFiles"},
		{"start with an empty task file", "POST", "/v1/swarms/start", start(api.StartRequest{RepoPath: repo, TaskFiles: []string{""}}), "taskFiles[0]"},
		{"start with negative max", "POST", "/v1/swarms/start", start(api.StartRequest{RepoPath: repo, TaskFiles: tf, Max: -1}), "max"},
		{"start with append and force", "POST", "/v1/swarms/start", start(api.StartRequest{RepoPath: repo, TaskFiles: tf, Append: true, Force: true}), "force"},
		{"start with an unknown field", "POST", "/v1/swarms/start", `{"repoPath":"` + repo + `","taskFile":["x"]}`, "body"},
		{"start with a non-JSON body", "POST", "/v1/swarms/start", `nope`, "body"},
		{"start with two JSON values", "POST", "/v1/swarms/start", start(api.StartRequest{RepoPath: repo, TaskFiles: tf}) + "{}", "body"},
		{"status without repo", "GET", "/v1/swarms/status", "", "repo"},
		{"stop with an empty name", "POST", "/v1/swarms/stop", `{"repoPath":"` + repo + `","names":[""]}`, "names[0]"},
		{"resume without repo", "POST", "/v1/swarms/resume", `{}`, "repoPath"},
		{"cleanup with relative repo", "POST", "/v1/swarms/cleanup", `{"repoPath":"."}`, "repoPath"},
		{"logs without name", "GET", "/v1/swarms/logs?repo=" + repo, "", "name"},
		{"logs with a bad follow", "GET", "/v1/swarms/logs?repo=" + repo + "&name=aimi-a&follow=often", "", "follow"},
		{"events with a relative repo", "GET", "/v1/events?repo=x", "", "repo"},
	}
	fake := &daemontest.Swarms{}
	_, _, sock := serve(t, fake)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, body := rawCall(t, sock, tt.method, tt.path, tt.body)
			if status != http.StatusBadRequest || body.Code != api.CodeInvalid || body.Field != tt.field {
				t.Fatalf("got %d %+v, want 400 invalid_request field %s", status, body, tt.field)
			}
			if !strings.Contains(body.Error, tt.field) {
				t.Errorf("message %q does not name the field", body.Error)
			}
		})
	}
	if len(fake.Calls()) != 0 {
		t.Errorf("invalid requests reached the swarms: %v", fake.Calls())
	}
}

func TestOrchestratorErrorsMapToHTTPCodesAndBackToSentinels(t *testing.T) {
	repo := shortTempDir(t)
	tests := []struct {
		name   string
		err    error
		status int
		code   string
		is     error
	}{
		{"active swarm is 409", api.ErrActiveSwarm, 409, api.CodeActiveSwarm, api.ErrActiveSwarm},
		{"no swarm is 404", fmt.Errorf("status %s: %w", repo, api.ErrNoSwarm), 404, api.CodeNotFound, api.ErrNoSwarm},
		{"unknown container is 404", fmt.Errorf("aimi-x: %w", api.ErrUnknownContainer), 404, api.CodeNotFound, api.ErrUnknownContainer},
		{"invalid request is 400", fmt.Errorf("%w: image: bad", api.ErrInvalidRequest), 400, api.CodeInvalid, api.ErrInvalidRequest},
		{"shutdown is 503", api.ErrShutdown, 503, api.CodeShuttingDown, api.ErrShutdown},
		{"anything else is 500", errors.New("engine exploded"), 500, api.CodeInternal, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, _, _ := serve(t, &daemontest.Swarms{StatusFunc: func(string) (api.SwarmView, error) { return api.SwarmView{}, tt.err }})
			_, err := c.Status(context.Background(), repo)
			var ae *api.APIError
			if !errors.As(err, &ae) {
				t.Fatalf("err = %v, want *api.APIError", err)
			}
			if ae.Status != tt.status || ae.Body.Code != tt.code || ae.Error() != tt.err.Error() {
				t.Fatalf("got %d %+v", ae.Status, ae.Body)
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("errors.Is(%v, %v) = false", err, tt.is)
			}
		})
	}
}

func TestInvalidTaskFilesComeBackAsProblemsPerFile(t *testing.T) {
	repo := shortTempDir(t)
	probs := []api.TaskFileProblem{{Path: ".aimi/tasks/a-tasks.json", Reason: "US-001: dependsOn US-009 which does not exist"}, {Path: "../x.json", Reason: "not under .aimi/tasks/"}}
	c, _, _ := serve(t, &daemontest.Swarms{StartFunc: func(api.StartRequest) (api.SwarmView, error) {
		return api.SwarmView{}, &api.TaskFileError{Problems: probs}
	}})
	_, err := c.Start(context.Background(), api.StartRequest{RepoPath: repo, TaskFiles: []string{"x"}})
	var ae *api.APIError
	if !errors.As(err, &ae) || ae.Status != 400 || ae.Body.Code != api.CodeTaskFiles || fmt.Sprint(ae.Body.Problems) != fmt.Sprint(probs) {
		t.Fatalf("err = %#v", err)
	}
	if !errors.Is(err, api.ErrInvalidRequest) || !strings.Contains(err.Error(), "nothing was started") {
		t.Errorf("err = %v", err)
	}
}

func TestPrepareStartCompletesTheRequestOrRefusesIt(t *testing.T) {
	repo := shortTempDir(t)
	var got api.StartRequest
	fake := &daemontest.Swarms{StartFunc: func(r api.StartRequest) (api.SwarmView, error) { got = r; return view(repo), nil }}
	c, _, _ := serve(t, fake, func(o *daemon.ServerOptions) {
		o.PrepareStart = func(_ context.Context, r *api.StartRequest) error {
			if r.Image == "bad" {
				return &api.FieldError{Field: "image", Reason: "bad image from .aimi/config.yaml"}
			}
			r.Image = "from-repo-config"
			return nil
		}
	})
	if _, err := c.Start(context.Background(), api.StartRequest{RepoPath: repo, TaskFiles: []string{"x"}}); err != nil || got.Image != "from-repo-config" {
		t.Fatalf("err=%v image=%q", err, got.Image)
	}
	_, err := c.Start(context.Background(), api.StartRequest{RepoPath: repo, TaskFiles: []string{"x"}, Image: "bad"})
	var ae *api.APIError
	if !errors.As(err, &ae) || ae.Status != 400 || ae.Body.Field != "image" {
		t.Fatalf("err = %v", err)
	}
}

func TestUnknownRouteIsA404WithAHint(t *testing.T) {
	_, _, sock := serve(t, &daemontest.Swarms{})
	status, body := rawCall(t, sock, "GET", "/v2/whatever", "")
	if status != 404 || body.Code != api.CodeNotFound || !strings.Contains(body.Error, "restart the daemon") {
		t.Fatalf("got %d %+v", status, body)
	}
}

func TestLogsStreamEveryRecordInOrder(t *testing.T) {
	repo := shortTempDir(t)
	var got api.LogsRequest
	fake := &daemontest.Swarms{JournalFunc: func(ctx context.Context, req api.LogsRequest) (<-chan state.Record, error) {
		if req.Name != "aimi-a" {
			return nil, fmt.Errorf("%s: %w", req.Name, api.ErrUnknownContainer)
		}
		got = req
		ch := make(chan state.Record)
		go func() {
			defer close(ch)
			for i := int64(1); i <= 500; i++ {
				select {
				case ch <- state.Record{Seq: i, Stream: "stdout", Valid: true, Type: "progress-update"}:
				case <-ctx.Done():
					return
				}
			}
		}()
		return ch, nil
	}}
	c, _, _ := serve(t, fake)
	var seqs []int64
	want := api.LogsRequest{RepoPath: repo, Name: "aimi-a", Follow: true, Tail: 20, Since: time.Date(2026, 11, 25, 18, 0, 0, 5, time.UTC), AfterSeq: 7}
	err := c.Logs(context.Background(), want, func(r state.Record) error { seqs = append(seqs, r.Seq); return nil })
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("err=%v; the server was asked %+v, want %+v", err, got, want)
	}
	if len(seqs) != 500 || seqs[0] != 1 || seqs[499] != 500 {
		t.Fatalf("got %d records", len(seqs))
	}
	for i, s := range seqs {
		if s != int64(i+1) {
			t.Fatalf("record %d has seq %d", i, s)
		}
	}
	err = c.Logs(context.Background(), api.LogsRequest{RepoPath: repo, Name: "aimi-zz"}, func(state.Record) error { return nil })
	if !errors.Is(err, api.ErrUnknownContainer) {
		t.Fatalf("unknown container: %v", err)
	}
}

// TestLogsRefusesABadSelection: tail, since and after that are not a
// count, a time and a seq are refused naming the parameter.
func TestLogsRefusesABadSelection(t *testing.T) {
	repo := shortTempDir(t)
	_, _, sock := serve(t, &daemontest.Swarms{})
	for _, q := range []string{"tail=-1", "tail=x", "tail=99999999999", "since=yesterday", "after=-3", "follow=maybe"} {
		field := strings.SplitN(q, "=", 2)[0]
		status, body := rawCall(t, sock, "GET", "/v1/swarms/logs?name=aimi-a&repo="+url.QueryEscape(repo)+"&"+q, "")
		if status != 400 || body.Code != api.CodeInvalid || !strings.HasPrefix(body.Error, field+":") {
			t.Errorf("%s: %d %+v", q, status, body)
		}
	}
}

func TestEventsArriveLiveAndFilteredByRepo(t *testing.T) {
	repo := shortTempDir(t)
	fake := &daemontest.Swarms{Events: make(chan api.Event)}
	c, _, _ := serve(t, fake)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got := make(chan api.Event)
	errc := make(chan error, 1)
	go func() {
		errc <- c.Events(ctx, repo, func(e api.Event) error {
			got <- e
			return nil
		})
	}()
	// The subscription is open once the fake saw it; send an event of another
	// repo (filtered out) and two of ours, one at a time: each must arrive
	// before the next is sent, proving the stream is flushed per event.
	for _, e := range []api.Event{
		{RepoPath: "/other", Kind: api.EventProgress},
		{RepoPath: repo, Kind: api.EventContainerStarted, ContainerName: "aimi-a"},
		{RepoPath: repo, Kind: api.EventProgress, StoryID: "US-001"},
	} {
		select {
		case fake.Events <- e:
		case <-ctx.Done():
			t.Fatal("subscription never opened")
		}
		if e.RepoPath != repo {
			continue
		}
		select {
		case g := <-got:
			if g.Kind != e.Kind || g.StoryID != e.StoryID {
				t.Fatalf("got %+v, want %+v", g, e)
			}
		case <-ctx.Done():
			t.Fatalf("event %v not delivered", e.Kind)
		}
	}
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("Events returned %v after cancel", err)
	}
}

func TestShutdownEndsOpenStreams(t *testing.T) {
	fake := &daemontest.Swarms{Events: make(chan api.Event)}
	c, srv, _ := serve(t, fake)
	errc := make(chan error, 1)
	go func() { errc <- c.Events(context.Background(), "", func(api.Event) error { return nil }) }()
	testwait.Eventually(t, time.Minute, "the event stream to reach the daemon",
		testwait.True(func() bool { return len(fake.Calls()) > 0 }), testwait.Every(5*time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		t.Fatalf("shutdown waited for the stream: %v", err)
	}
	select {
	case err := <-errc:
		if err != nil {
			t.Errorf("stream ended with %v", err)
		}
	case <-ctx.Done():
		t.Fatal("stream did not end")
	}
}

func TestNoDaemonGivesUnreachableWithTheStartCommand(t *testing.T) {
	sock := filepath.Join(shortTempDir(t), "aimid.sock")
	c := daemon.NewClient(sock)
	_, err := c.Health(context.Background())
	if !errors.Is(err, daemon.ErrUnreachable) {
		t.Fatalf("err = %v", err)
	}
	// The unit that ships (deploy/aimid.service) is a system unit.
	for _, want := range []string{sock, "aimid &", "sudo systemctl start aimid", "--socket /run/aimi/aimid.sock"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not mention %q", err, want)
		}
	}
}

func TestErrorAnswersAreLoggedWithoutBodies(t *testing.T) {
	repo := shortTempDir(t)
	var logs bytes.Buffer
	fake := &daemontest.Swarms{}
	_, _, sock := serve(t, fake, func(o *daemon.ServerOptions) {
		o.Logger = slogTo(&logs)
	})
	rawCall(t, sock, "POST", "/v1/swarms/start", `{"repoPath":"`+repo+`","taskFiles":["x"],"append":true,"force":true,"image":"SECRETISH"}`)
	if strings.Contains(logs.String(), "SECRETISH") {
		t.Fatalf("request body logged: %s", logs.String())
	}
	if !strings.Contains(logs.String(), "request refused") {
		t.Errorf("refusal not logged: %s", logs.String())
	}
}

func TestListAnswersEverySwarmAndNeverNull(t *testing.T) {
	repo := shortTempDir(t)
	var views []api.SwarmView
	fake := &daemontest.Swarms{ListFunc: func() []api.SwarmView { return views }}
	c, _, _ := serve(t, fake)
	l, err := c.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if l.Swarms == nil || len(l.Swarms) != 0 {
		t.Fatalf("list with no swarm = %#v, want an empty list", l.Swarms)
	}
	views = []api.SwarmView{view(repo)}
	l, err = c.List(context.Background())
	if err != nil || len(l.Swarms) != 1 || l.Swarms[0].RepoPath != repo {
		t.Fatalf("list = %+v, %v; want the one swarm of %s", l, err, repo)
	}
}
