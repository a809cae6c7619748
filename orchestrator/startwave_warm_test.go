package orchestrator

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/engine"
)

// fakePool hands out sandboxes the fake engine creates and starts at the
// claim, as a pool's are (running before their claim), for the task files
// whose container names end in one of names; hold, when set, runs at the
// start of each claim.
type fakePool struct {
	eng   *fakeEngine
	names []string
	hold  func(name string)
}

func (p *fakePool) Claim(ctx context.Context, s engine.Spec) (engine.Info, bool, error) {
	if p.hold != nil {
		p.hold(s.Name)
	}
	if !slices.ContainsFunc(p.names, func(n string) bool { return strings.HasSuffix(s.Name, "-"+n) }) {
		return engine.Info{}, false, nil
	}
	id, err := p.eng.Create(ctx, s)
	if err != nil {
		return engine.Info{}, false, err
	}
	if err := p.eng.Start(ctx, id); err != nil {
		return engine.Info{}, false, err
	}
	info, err := p.eng.Inspect(ctx, id)
	return info, err == nil, err
}

func (p *fakePool) Confirm(ids ...string) error { return nil }
func (p *fakePool) Busy() (done func())         { return func() {} }
func (p *fakePool) SocketDir(id string) string  { return "" }

// order records what happened to which container, by its task file's
// last letter.
type order struct {
	mu  sync.Mutex
	eng *fakeEngine
	log []string
}

func (o *order) note(what, name string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.log = append(o.log, what+" "+name[len(name)-1:])
}

func (o *order) noteID(what, id string) {
	o.eng.mu.Lock()
	name := o.eng.get(id).spec.Name
	o.eng.mu.Unlock()
	o.note(what, name)
}

func (o *order) index(what string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Index(o.log, what)
}

// Sandboxes claimed from the warm pool run already: while no container of
// their start is being created they get their work at once, not after the
// wave's last claim. The claim of c is held until everything else in the
// bubble is blocked (synctest): a and b waiting for the wave would have no
// task-request by then.
func TestClaimedSandboxesGetTheirWorkWithoutWaitingForTheWave(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		repo, files := testRepo(t, []string{"a", "b", "c"}, 1)
		eng := newFakeEngine(byTask(nil, scripted(0, storiesDone(1)...)))
		o := &order{eng: eng}
		pool := &fakePool{eng: eng, names: []string{"a", "b", "c"}, hold: func(name string) {
			if strings.HasSuffix(name, "-c") {
				synctest.Wait()
				o.note("claim", name)
			}
		}}
		eng.beforeStdin = func(id string) { o.noteID("request", id) }
		m := newTestManager(t, eng, Config{Warm: pool})
		if _, err := m.Start(context.Background(), api.StartRequest{RepoPath: repo, TaskFiles: files}); err != nil {
			t.Fatal(err)
		}
		waitTerminal(t, m, repo, waveMaxWait/2)
		claimC, reqA, reqB := o.index("claim c"), o.index("request a"), o.index("request b")
		if claimC < 0 || reqA < 0 || reqB < 0 || reqA > claimC || reqB > claimC {
			t.Fatalf("the claimed sandboxes a and b waited for c's claim: %v", o.log)
		}
	})
}

// Once a container of the start is created (the pool ran dry), claimed
// sandboxes wait for the wave as created ones do: their work would compete
// with the engine's start. c's create begins before a's and b's claims
// return; its start is held until everything else is blocked.
func TestClaimedSandboxesWaitForTheWaveOnceOneIsCreated(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		repo, files := testRepo(t, []string{"a", "b", "c"}, 1)
		eng := newFakeEngine(byTask(nil, scripted(0, storiesDone(1)...)))
		o := &order{eng: eng}
		creating := make(chan struct{})
		var once sync.Once
		eng.beforeCreate = func(ctx context.Context, name string) error {
			if strings.HasSuffix(name, "-c") {
				once.Do(func() { close(creating) })
			}
			return nil
		}
		pool := &fakePool{eng: eng, names: []string{"a", "b"}, hold: func(name string) {
			if !strings.HasSuffix(name, "-c") {
				<-creating
			}
		}}
		eng.beforeStart = func(id string) {
			eng.mu.Lock()
			slow := strings.HasSuffix(eng.get(id).spec.Name, "-c")
			eng.mu.Unlock()
			if slow {
				synctest.Wait()
			}
		}
		eng.afterStart = func(id string) { o.noteID("start", id) }
		eng.beforeStdin = func(id string) { o.noteID("request", id) }
		m := newTestManager(t, eng, Config{Warm: pool})
		if _, err := m.Start(context.Background(), api.StartRequest{RepoPath: repo, TaskFiles: files}); err != nil {
			t.Fatal(err)
		}
		waitTerminal(t, m, repo, waveMaxWait/2)
		startC, reqA, reqB := o.index("start c"), o.index("request a"), o.index("request b")
		if startC < 0 || reqA < startC || reqB < startC {
			t.Fatalf("a claimed sandbox got its work before the created c started: %v", o.log)
		}
	})
}
