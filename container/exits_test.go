package container

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/engine"
	"github.com/aimi-tools/swarm/internal/testwait"
	"github.com/docker/docker/client"
)

// tap watches the requests of a Docker made by tapped: it counts them by
// kind ("events", "wait") and can break the event streams open now and
// hold the next ones back.
type tap struct {
	mu      sync.Mutex
	counts  map[string]int
	streams []io.Closer
	gate    chan struct{} // non-nil: event requests wait until it closes
	opened  chan struct{} // an event stream's headers arrived
}

func (p *tap) count(kind string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.counts[kind]
}

// breakStreams closes the bodies of the open event streams, as a dropped
// connection would end them, and holds the next stream until release.
func (p *tap) breakStreams() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.gate = make(chan struct{})
	for _, s := range p.streams {
		s.Close()
	}
	p.streams = nil
}

func (p *tap) release() {
	p.mu.Lock()
	defer p.mu.Unlock()
	close(p.gate)
	p.gate = nil
}

func (p *tap) roundTrip(inner http.RoundTripper, r *http.Request) (*http.Response, error) {
	kind := r.URL.Path[strings.LastIndex(r.URL.Path, "/")+1:]
	p.mu.Lock()
	p.counts[kind]++
	gate := p.gate
	p.mu.Unlock()
	if kind == "events" && gate != nil {
		select {
		case <-gate:
		case <-r.Context().Done():
			return nil, r.Context().Err()
		}
	}
	resp, err := inner.RoundTrip(r)
	if err == nil && kind == "events" {
		p.mu.Lock()
		p.streams = append(p.streams, resp.Body)
		p.mu.Unlock()
		select {
		case p.opened <- struct{}{}:
		default:
		}
	}
	return resp, err
}

// tapped is a Docker on the rig's engine whose requests the returned tap
// watches; it is closed when the test ends.
func (e *rig) tapped(t *testing.T, opts ...Option) (*Docker, *tap) {
	t.Helper()
	p := &tap{counts: map[string]int{}, opened: make(chan struct{}, 16)}
	hc := e.cli.HTTPClient()
	inner := hc.Transport
	hc.Transport = roundTripFunc(func(r *http.Request) (*http.Response, error) { return p.roundTrip(inner, r) })
	cli, err := client.NewClientWithOpts(client.WithHost(e.cli.DaemonHost()), client.WithHTTPClient(hc), client.WithVersion(e.cli.ClientVersion()))
	if err != nil {
		t.Fatal(err)
	}
	d := newDocker(cli, append([]Option{WithLogger(e.d.log)}, opts...)...)
	t.Cleanup(func() { d.exits.close() })
	return d, p
}

// exitWithin is the channel's exit, failing the test after a bound.
func exitWithin(t *testing.T, ch <-chan engine.Exit, what string) engine.Exit {
	t.Helper()
	select {
	case ex := <-ch:
		return ex
	case <-time.After(2 * time.Minute):
		t.Fatalf("%s: no exit within 2 minutes", what)
		return engine.Exit{}
	}
}

// testExitsShareOneStream: twenty containers waited at once get their
// exit codes from one event stream, no ContainerWait, and the stream
// closes with the last exit.
func (e *rig) testExitsShareOneStream(t *testing.T) {
	ctx := testCtx(t)
	d, p := e.tapped(t)
	const n = 20
	ids := make([]string, n)
	exits := make([]<-chan engine.Exit, n)
	for i := range n {
		ids[i] = e.create(t, ctx, e.spec(fmt.Sprintf("shared-%02d", i), fmt.Sprintf("exit:%d", i+1)))
		exits[i] = d.Wait(ctx, ids[i])
	}
	for _, id := range ids {
		if err := e.d.Start(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	for i, ch := range exits {
		if ex := exitWithin(t, ch, ids[i]); ex.Err != nil || ex.Code != i+1 || ex.OOMKilled {
			t.Errorf("container %d: exit %+v, want code %d", i, ex, i+1)
		}
	}
	if ev, w := p.count("events"), p.count("wait"); ev != 1 || w != 0 {
		t.Errorf("%d containers waited with %d event streams and %d waits, want 1 and 0", n, ev, w)
	}
	if d.exits.streaming() {
		t.Error("the event stream is still open with no container waited for")
	}
}

// testWaitOnRunning: a wait registered for a running container (one
// adopted after a restart) gets the exit that follows at once; one for a
// container that has exited gets that exit.
func (e *rig) testWaitOnRunning(t *testing.T) {
	ctx := testCtx(t)
	id, _, lines := e.launch(t, ctx, e.spec("adopted", "line:ready;readstdin;exit:4"))
	until(t, lines, "ready")
	d, _ := e.tapped(t)
	exit := d.Wait(ctx, id)
	if err := e.d.WriteStdin(ctx, id, []byte("go")); err != nil {
		t.Fatal(err)
	}
	if ex := exitWithin(t, exit, "running"); ex.Err != nil || ex.Code != 4 {
		t.Fatalf("exit of a container waited for while running = %+v, want code 4", ex)
	}
	if ex := exitWithin(t, d.Wait(ctx, id), "exited"); ex.Err != nil || ex.Code != 4 {
		t.Fatalf("wait on an exited container = %+v, want its code 4", ex)
	}
}

// testExitStreamBreaks: exits while the stream is down, and after it is
// back, reach their waiters.
func (e *rig) testExitStreamBreaks(t *testing.T) {
	ctx := testCtx(t)
	d, p := e.tapped(t)
	var ids [2]string
	var exits [2]<-chan engine.Exit
	for i := range ids {
		ids[i] = e.create(t, ctx, e.spec(fmt.Sprintf("break%d", i), "line:ready;readstdin;exit:"+fmt.Sprint(5+i)))
		exits[i] = d.Wait(ctx, ids[i])
		if err := e.d.Start(ctx, ids[i]); err != nil {
			t.Fatal(err)
		}
	}
	<-p.opened
	p.breakStreams()
	// The first exits while no stream is open.
	if err := e.d.WriteStdin(ctx, ids[0], []byte("go")); err != nil {
		t.Fatal(err)
	}
	testwait.Eventually(t, time.Minute, "the first container to exit", func() error {
		info, err := e.d.Inspect(ctx, ids[0])
		if err == nil && info.Status != "exited" {
			err = fmt.Errorf("status %s", info.Status)
		}
		return err
	}, testwait.Every(50*time.Millisecond))
	p.release()
	if ex := exitWithin(t, exits[0], "exited while the stream was down"); ex.Err != nil || ex.Code != 5 {
		t.Fatalf("exit while the stream was down = %+v, want code 5", ex)
	}
	<-p.opened
	if err := e.d.WriteStdin(ctx, ids[1], []byte("go")); err != nil {
		t.Fatal(err)
	}
	if ex := exitWithin(t, exits[1], "exited after the stream was back"); ex.Err != nil || ex.Code != 6 {
		t.Fatalf("exit after the stream was back = %+v, want code 6", ex)
	}
	if n := p.count("events"); n != 2 {
		t.Errorf("event streams asked for: %d, want 2 (one break)", n)
	}
}

// testWaitRemoved: a container removed while waited for, or gone before,
// reports ErrNotFound; a wait whose ctx ends reports ctx's error.
func (e *rig) testWaitRemoved(t *testing.T) {
	ctx := testCtx(t)
	d, _ := e.tapped(t)
	id := e.create(t, ctx, e.spec("removed", "exit:0"))
	exit := d.Wait(ctx, id)
	if err := e.d.Remove(ctx, id); err != nil {
		t.Fatal(err)
	}
	if ex := exitWithin(t, exit, "removed"); !errors.Is(ex.Err, engine.ErrNotFound) {
		t.Fatalf("wait on a container removed meanwhile = %+v, want ErrNotFound", ex)
	}
	if ex := exitWithin(t, d.Wait(ctx, id), "gone"); !errors.Is(ex.Err, engine.ErrNotFound) {
		t.Fatalf("wait on a removed container = %+v, want ErrNotFound", ex)
	}
	other := e.create(t, ctx, e.spec("cancelled", "exit:0"))
	wctx, cancel := context.WithCancel(ctx)
	exit = d.Wait(wctx, other)
	cancel()
	if ex := exitWithin(t, exit, "cancelled"); !errors.Is(ex.Err, context.Canceled) {
		t.Fatalf("wait whose ctx ended = %+v, want context.Canceled", ex)
	}
	if d.exits.streaming() {
		t.Error("the event stream is still open with no container waited for")
	}
}

// testWaitWithoutLabels: a container the event stream does not select
// (not of this Docker's owner) is waited for with a ContainerWait.
func (e *rig) testWaitWithoutLabels(t *testing.T) {
	ctx := testCtx(t)
	d, p := e.tapped(t, WithOwner(map[string]string{contract.LabelDaemon: "not-" + e.run}))
	id := e.create(t, ctx, e.spec("foreign", "line:ready;readstdin;exit:9"))
	exit := d.Wait(ctx, id)
	if err := e.d.Start(ctx, id); err != nil {
		t.Fatal(err)
	}
	testwait.Eventually(t, time.Minute, "a ContainerWait for a container the event stream does not select",
		testwait.True(func() bool { return p.count("wait") > 0 }), testwait.Every(20*time.Millisecond))
	if err := e.d.WriteStdin(ctx, id, []byte("go")); err != nil {
		t.Fatal(err)
	}
	if ex := exitWithin(t, exit, "foreign"); ex.Err != nil || ex.Code != 9 {
		t.Fatalf("exit of a container outside the stream's labels = %+v, want code 9", ex)
	}
}
