package orchestrator

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aimi-tools/swarm/acpmsg"
	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/engine"
	"github.com/aimi-tools/swarm/internal/logcursor"
)

// program is what a fake container runs: it gets the stdin lines, emits
// output lines, and sees SIGTERM on term. It returns the exit code and
// whether it "ran out of memory". ctx ends when the container is killed.
type program func(ctx context.Context, stdin <-chan []byte, emit func(string), term <-chan struct{}) (code int, oom bool)

// fakeEngine is a hand-written in-memory Engine: containers run programs
// in goroutines, independent of any Manager (so a Manager can "crash" while
// they go on), with cursors, waits and stops like the real engine's.
type fakeEngine struct {
	mu       sync.Mutex
	ctrs     map[string]*fakeCtr
	programs func(spec engine.Spec) program
	running  int
	peak     int
	starts   int
	clock    time.Time
	nets     map[string]bool
	// stdinFails makes WriteStdin fail for containers whose name contains
	// it.
	stdinFails string
	// beforeCreate, when set, runs before each Create (outside the lock)
	// and may hold it back or fail it; beforeStart likewise before each
	// Start.
	beforeCreate func(ctx context.Context, name string) error
	beforeStart  func(id string)
	// afterStart runs after each successful Start, beforeStdin before each
	// WriteStdin and afterStdin after each one that delivered (all outside
	// the lock).
	afterStart  func(id string)
	beforeStdin func(id string)
	afterStdin  func(id string)
	// stopHangs, when set, makes Stop block until it is closed (an engine
	// that never answers the stop).
	stopHangs chan struct{}
	stopsHung int // Stop calls blocked on stopHangs so far
	// removeHangs, when set, makes Remove block until it is closed or the
	// caller's context ends (an engine that does not answer the remove).
	removeHangs    chan struct{}
	removesWaiting atomic.Int32 // removes blocked on removeHangs
}

type fakeCtr struct {
	id      string
	spec    engine.Spec
	status  string // created, running, exited
	code    int
	oom     bool
	pid     int
	started time.Time
	lines   []engine.Line
	changed chan struct{} // closed and replaced on every change
	stdin   chan []byte
	fed     bool // a stdin line was delivered (the task-request first)
	term    chan struct{}
	termed  bool
	kill    context.CancelFunc
	waiters []chan engine.Exit
}

func newFakeEngine(programs func(spec engine.Spec) program) *fakeEngine {
	return &fakeEngine{ctrs: map[string]*fakeCtr{}, programs: programs, clock: time.Now().UTC(), nets: map[string]bool{}}
}

func randID() string {
	b := make([]byte, 32)
	rand.Read(b)
	return hex.EncodeToString(b)
}

func (f *fakeEngine) EnsureNetwork(ctx context.Context, name string, labels map[string]string) (engine.NetworkInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.nets[name] = true
	return engine.NetworkInfo{Name: name, Gateway: "172.30.0.1"}, nil
}

func (f *fakeEngine) RemoveNetworkIfUnused(ctx context.Context, name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.nets, name)
	return nil
}

func (f *fakeEngine) byName(name string) *fakeCtr {
	for _, c := range f.ctrs {
		if c.spec.Name == name {
			return c
		}
	}
	return nil
}

func (f *fakeEngine) get(idOrName string) *fakeCtr {
	if c, ok := f.ctrs[idOrName]; ok {
		return c
	}
	return f.byName(idOrName)
}

func (f *fakeEngine) Create(ctx context.Context, s engine.Spec) (string, error) {
	if f.beforeCreate != nil {
		if err := f.beforeCreate(ctx, s.Name); err != nil {
			return "", err
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if !nameRe.MatchString(s.Name) {
		return "", engine.ErrInvalidName
	}
	if s.Image == "missing:latest" {
		return "", fmt.Errorf("%w: build it with 'make sandbox-image'", engine.ErrImageNotFound)
	}
	if old := f.byName(s.Name); old != nil {
		// As container.Docker: only a stopped container of the same
		// repository is replaced.
		if old.status == "running" || old.spec.Labels[contract.LabelProject] != s.Labels[contract.LabelProject] {
			return "", engine.ErrConflict
		}
		delete(f.ctrs, old.id)
	}
	c := &fakeCtr{id: randID(), spec: s, status: "created", changed: make(chan struct{}), stdin: make(chan []byte, 8), term: make(chan struct{})}
	f.ctrs[c.id] = c
	return c.id, nil
}

// emitLocked appends a line with the next engine timestamp.
func (f *fakeEngine) emitLocked(c *fakeCtr, s string) {
	f.clock = f.clock.Add(time.Microsecond)
	ln := engine.Line{Cursor: logcursor.Cursor{Time: f.clock}, Stream: engine.Stdout, Data: []byte(s), Size: len(s)}
	if len(s) > acpmsg.MaxLineBytes {
		ln.Data, ln.Err = nil, fmt.Errorf("%w: %d bytes", engine.ErrLineTooLong, len(s))
	}
	c.lines = append(c.lines, ln)
	f.notifyLocked(c)
}

func (f *fakeEngine) notifyLocked(c *fakeCtr) {
	close(c.changed)
	c.changed = make(chan struct{})
}

func (f *fakeEngine) Start(ctx context.Context, id string) error {
	if f.beforeStart != nil {
		f.beforeStart(id)
	}
	f.mu.Lock()
	c := f.get(id)
	if c == nil {
		f.mu.Unlock()
		return engine.ErrNotFound
	}
	if c.status != "created" {
		f.mu.Unlock()
		return fmt.Errorf("container %s is %s", id, c.status)
	}
	c.status = "running"
	c.pid = 1000 + len(f.ctrs)
	c.started = time.Now()
	f.running++
	f.starts++
	f.peak = max(f.peak, f.running)
	pctx, kill := context.WithCancel(context.Background())
	c.kill = kill
	prog := f.programs(c.spec)
	f.notifyLocked(c)
	f.mu.Unlock()
	go func() {
		code, oom := prog(pctx, c.stdin, func(s string) {
			f.mu.Lock()
			defer f.mu.Unlock()
			if c.status == "running" {
				f.emitLocked(c, s)
			}
		}, c.term)
		if pctx.Err() != nil {
			code, oom = 137, false
		}
		f.exit(c, code, oom)
	}()
	if f.afterStart != nil {
		f.afterStart(id)
	}
	return nil
}

func (f *fakeEngine) exit(c *fakeCtr, code int, oom bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if c.status != "running" {
		return
	}
	c.status, c.code, c.oom, c.pid = "exited", code, oom, 0
	f.running--
	for _, w := range c.waiters {
		w <- engine.Exit{Code: code, OOMKilled: oom}
		close(w)
	}
	c.waiters = nil
	f.notifyLocked(c)
}

func (f *fakeEngine) Wait(ctx context.Context, id string) <-chan engine.Exit {
	f.mu.Lock()
	defer f.mu.Unlock()
	ch := make(chan engine.Exit, 1)
	c := f.get(id)
	if c == nil {
		ch <- engine.Exit{Err: engine.ErrNotFound}
		close(ch)
		return ch
	}
	c.waiters = append(c.waiters, ch)
	return ch
}

func (f *fakeEngine) WriteStdin(ctx context.Context, id string, line []byte) error {
	if f.beforeStdin != nil {
		f.beforeStdin(id)
	}
	f.mu.Lock()
	c := f.get(id)
	fails := f.stdinFails != "" && c != nil && strings.Contains(c.spec.Name, f.stdinFails)
	f.mu.Unlock()
	if c == nil {
		return engine.ErrNotFound
	}
	if fails {
		return fmt.Errorf("attach stdin: connection reset")
	}
	select {
	case c.stdin <- append([]byte(nil), line...):
		f.mu.Lock()
		c.fed = true
		f.mu.Unlock()
		if f.afterStdin != nil {
			f.afterStdin(id)
		}
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (f *fakeEngine) Lines(ctx context.Context, id string, after logcursor.Position, follow bool) (<-chan engine.Line, error) {
	f.mu.Lock()
	c := f.get(id)
	f.mu.Unlock()
	if c == nil {
		return nil, engine.ErrNotFound
	}
	out := make(chan engine.Line, 16)
	go func() {
		defer close(out)
		i := 0
		for {
			f.mu.Lock()
			var batch []engine.Line
			for ; i < len(c.lines); i++ {
				from := after.Stdout
				if c.lines[i].Stream == engine.Stderr {
					from = after.Stderr
				}
				if c.lines[i].Cursor.After(from) {
					batch = append(batch, c.lines[i])
				}
			}
			done := !follow || c.status == "exited"
			changed := c.changed
			f.mu.Unlock()
			for _, ln := range batch {
				select {
				case out <- ln:
				case <-ctx.Done():
					return
				}
			}
			if done {
				return
			}
			select {
			case <-changed:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, nil
}

func (f *fakeEngine) info(c *fakeCtr) engine.Info {
	return engine.Info{ID: c.id, Name: c.spec.Name, Image: c.spec.Image, Labels: c.spec.Labels, Status: c.status,
		Running: c.status == "running", ExitCode: c.code, OOMKilled: c.oom, Pid: c.pid, StartedAt: c.started}
}

func (f *fakeEngine) Inspect(ctx context.Context, id string) (engine.Info, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.get(id)
	if c == nil {
		return engine.Info{}, engine.ErrNotFound
	}
	return f.info(c), nil
}

func (f *fakeEngine) Stop(ctx context.Context, id string, grace time.Duration) error {
	if f.stopHangs != nil {
		f.mu.Lock()
		f.stopsHung++
		f.mu.Unlock()
		<-f.stopHangs
		return errors.New("the engine did not answer the stop")
	}
	f.mu.Lock()
	c := f.get(id)
	if c == nil {
		f.mu.Unlock()
		return engine.ErrNotFound
	}
	if c.status != "running" {
		f.mu.Unlock()
		return nil
	}
	if !c.termed {
		c.termed = true
		close(c.term)
	}
	kill := c.kill
	f.mu.Unlock()
	t := time.NewTimer(grace)
	defer t.Stop()
	for {
		f.mu.Lock()
		st, ch := c.status, c.changed
		f.mu.Unlock()
		if st != "running" {
			return nil
		}
		select {
		case <-ch:
		case <-t.C:
			kill()
			return nil
		}
	}
}

func (f *fakeEngine) Remove(ctx context.Context, id string) error {
	if f.removeHangs != nil {
		f.removesWaiting.Add(1)
		defer f.removesWaiting.Add(-1)
		select {
		case <-f.removeHangs:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	f.mu.Lock()
	c := f.get(id)
	f.mu.Unlock()
	if c == nil {
		return nil
	}
	if c.kill != nil {
		c.kill()
	}
	f.mu.Lock()
	delete(f.ctrs, c.id)
	f.mu.Unlock()
	return nil
}

func (f *fakeEngine) List(ctx context.Context, labels map[string]string) ([]engine.Info, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []engine.Info
next:
	for _, c := range f.ctrs {
		for k, v := range labels {
			if c.spec.Labels[k] != v {
				continue next
			}
		}
		out = append(out, f.info(c))
	}
	return out, nil
}

func (f *fakeEngine) counters() (starts, peak int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.starts, f.peak
}

// linesEmitted counts the output lines of every container so far.
func (f *fakeEngine) linesEmitted() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, c := range f.ctrs {
		n += len(c.lines)
	}
	return n
}

// statusOf is the status of the container whose name contains frag
// ("" when there is none).
func (f *fakeEngine) statusOf(frag string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range f.ctrs {
		if strings.Contains(c.spec.Name, frag) {
			return c.status
		}
	}
	return ""
}

// anyRunningWithRequest says whether a running container has had a stdin
// line: one without its task-request cannot go on until a daemon sends it.
func (f *fakeEngine) anyRunningWithRequest() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range f.ctrs {
		if c.status == "running" && c.fed {
			return true
		}
	}
	return false
}

// fedOf says whether the container whose name contains frag has had a
// stdin line.
func (f *fakeEngine) fedOf(frag string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range f.ctrs {
		if strings.Contains(c.spec.Name, frag) {
			return c.fed
		}
	}
	return false
}

func (f *fakeEngine) runningNow() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.running
}
