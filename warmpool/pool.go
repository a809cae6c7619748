package warmpool

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/engine"
)

// Defaults of Options.
const (
	DefaultMaxAge = time.Hour
	// maxPoll bounds how long a dead or outdated pool sandbox waits to be
	// noticed (and the pool to be topped up after a missed kick).
	maxPoll = 10 * time.Second
	minPoll = 250 * time.Millisecond
	// refillDelay is how long the pool waits after the last start ended
	// before it creates again: the engine is busy starting the claimed
	// and created containers' work right after a start returns.
	refillDelay = time.Second
)

// Options configure a Pool.
type Options struct {
	// Dir is where the claim records live (the daemon's data directory).
	Dir string
	// Labels are the daemon's selector (contract.LabelSandbox and its
	// instance): every pool sandbox carries them, and only such sandboxes
	// are the pool's.
	Labels map[string]string
	// MaxAge is how long a sandbox may wait in the pool (DefaultMaxAge).
	MaxAge time.Duration
	// SocketRoot, when set, is where each pool sandbox gets a directory
	// of its own, empty until its claim, mounted at contract.NetDir at its
	// create: a sandbox on no network reaches the daemon's services
	// through the sockets served there from its claim on (SocketDir).
	SocketRoot string
	Logger     *slog.Logger
}

// target is how many sandboxes of one spec the pool keeps.
type target struct {
	spec   engine.Spec
	global int            // the daemon's sandbox.warm_pool
	repos  map[string]int // per repository, as its last start's config said
}

func (t *target) want() int {
	n := t.global
	for _, v := range t.repos {
		n = max(n, v)
	}
	return n
}

// Pool keeps warm sandboxes and hands them out (see the package doc).
type Pool struct {
	eng    Engine
	claims *claims
	labels map[string]string
	maxAge time.Duration
	socks  string // Options.SocketRoot
	log    *slog.Logger

	mu      sync.Mutex
	targets map[string]*target  // by Key
	repoKey map[string]string   // repository -> the key its claims take
	repoN   map[string]int      // repository -> its sandbox.warm_pool
	idle    map[string][]string // by Key: running, unclaimed, current
	taking  map[string]bool     // picked by a claim, not yet recorded
	busy    int                 // starts in progress
	quiet   time.Time           // when the last start ended
	kick    chan struct{}
	missing map[string]bool // images found gone, said once until they are back
}

// New opens the pool's claim records in opts.Dir. Nothing runs until Run.
func New(eng Engine, opts Options) (*Pool, error) {
	c, err := openClaims(opts.Dir)
	if err != nil {
		return nil, err
	}
	p := &Pool{
		eng: eng, claims: c, labels: maps.Clone(opts.Labels), maxAge: opts.MaxAge, socks: opts.SocketRoot, log: opts.Logger,
		targets: map[string]*target{}, repoKey: map[string]string{}, repoN: map[string]int{},
		idle: map[string][]string{}, taking: map[string]bool{}, kick: make(chan struct{}, 1), missing: map[string]bool{},
	}
	if p.maxAge <= 0 {
		p.maxAge = DefaultMaxAge
	}
	if p.log == nil {
		p.log = slog.Default()
	}
	if p.labels == nil {
		p.labels = map[string]string{}
	}
	p.labels[contract.LabelSandbox] = "true"
	return p, nil
}

// Key is the digest of what a sandbox is created with and cannot change
// later: a claim takes only a sandbox of its spec's key. The name, labels,
// environment, mounts and network are given at the claim instead; whether
// it is sealed is not (a sealed sandbox cannot join a network).
func Key(s engine.Spec) string {
	b, _ := json.Marshal(struct {
		Image                            string
		NanoCPUs, Mem, Swap, Pids, Disk  int64
		ReadOnly, RequireRuntime, Sealed bool
		Scratch, ExtraHosts, Cmd         []string
		Runtime, User, WorkDir           string
	}{s.Image, s.NanoCPUs, s.MemoryBytes, s.MemorySwapBytes, s.PidsLimit, s.DiskBytes, s.ReadOnlyRootfs, s.RequireRuntime, s.Sealed,
		s.Scratch, s.ExtraHosts, s.Cmd, s.Runtime, s.User, s.WorkingDir})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:12])
}

// SetTarget keeps n sandboxes of spec (the daemon's sandbox.warm_pool);
// 0 empties the pool of that spec. Only the spec's settings count (Key).
func (p *Pool) SetTarget(spec engine.Spec, n int) {
	p.mu.Lock()
	p.targetLocked(spec).global = max(n, 0)
	p.mu.Unlock()
	p.poke()
}

// SetRepo records a repository's sandbox.warm_pool and image settings (its
// config may override the daemon's): its starts claim only when n > 0, and
// the pool of its spec keeps at least n.
func (p *Pool) SetRepo(repo string, spec engine.Spec, n int) {
	p.mu.Lock()
	k := Key(spec)
	if old, ok := p.repoKey[repo]; ok && old != k {
		if t := p.targets[old]; t != nil {
			delete(t.repos, repo)
		}
	}
	p.targetLocked(spec).repos[repo] = max(n, 0)
	p.repoKey[repo], p.repoN[repo] = k, max(n, 0)
	p.mu.Unlock()
	p.poke()
}

func (p *Pool) targetLocked(spec engine.Spec) *target {
	k := Key(spec)
	t := p.targets[k]
	if t == nil {
		t = &target{spec: spec, repos: map[string]int{}}
		p.targets[k] = t
	}
	return t
}

// Busy marks a start in progress: the pool creates nothing until every
// start ended (and refillDelay passed), so that its creates never queue
// before a start's own at the engine. Call the returned func when done.
func (p *Pool) Busy() (done func()) {
	p.mu.Lock()
	p.busy++
	p.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			p.mu.Lock()
			p.busy--
			p.quiet = time.Now()
			p.mu.Unlock()
			p.poke()
		})
	}
}

func (p *Pool) poke() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// poolLabels are the labels of every pool sandbox, with extra.
func (p *Pool) poolLabels(extra map[string]string) map[string]string {
	l := maps.Clone(p.labels)
	l[contract.LabelWarm] = contract.WarmLabelPool
	maps.Copy(l, extra)
	return l
}

// pick takes an idle sandbox of key for a claim (false when none).
func (p *Pool) pick(repo, key string) (string, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if n, ok := p.repoN[repo]; ok && n == 0 {
		return "", false // the repository's config turned the pool off
	}
	if t := p.targets[key]; t == nil || t.want() == 0 {
		return "", false
	}
	ids := p.idle[key]
	if len(ids) == 0 {
		return "", false
	}
	id := ids[0] // the oldest: the younger ones have longer to live
	p.idle[key] = slices.Delete(ids, 0, 1)
	p.taking[id] = true
	return id, true
}

func (p *Pool) untake(id string) {
	p.mu.Lock()
	delete(p.taking, id)
	p.mu.Unlock()
}

// Claim hands a waiting sandbox of s's settings to s's container: it
// records the claim, renames the sandbox to s.Name and, unless s.Network
// is engine.NetworkNone (sealed: it stays there), joins it to s.Network.
// ok is false (nothing done) when no sandbox fits or the hand over
// failed, and the caller creates as before; a name another container
// holds is engine.ErrConflict, as from a create. The environment and
// mounts of s are not applied: the caller sends them in claim lines
// (contract.WarmClaim) before the task-request, once its state file holds
// the container.
func (p *Pool) Claim(ctx context.Context, s engine.Spec) (info engine.Info, ok bool, err error) {
	key := Key(s)
	repo := s.Labels[contract.LabelProject]
	for {
		id, found := p.pick(repo, key)
		if !found {
			p.poke()
			return engine.Info{}, false, nil
		}
		info, ok, err = p.claimOne(ctx, id, s)
		p.untake(id) // the one picked (an earlier version untook what claimOne returned, "" on a failed record)
		if ok || err != nil {
			p.poke()
			return info, ok, err
		}
		if ctx.Err() != nil {
			return engine.Info{}, false, nil
		}
	}
}

// claimOne hands sandbox id to s; ok false (and no error) when id is not
// usable, which the caller answers by trying the next one. The info is the
// engine's inspect of the running sandbox just before its claim, under
// its new name.
func (p *Pool) claimOne(ctx context.Context, id string, s engine.Spec) (engine.Info, bool, error) {
	info, err := p.eng.Inspect(ctx, id)
	if err != nil || !info.Running {
		p.discard(ctx, id, "it is not running")
		return engine.Info{ID: id}, false, nil
	}
	labels := maps.Clone(s.Labels)
	labels[contract.LabelSandbox] = "true"
	cl := claim{Phase: phaseClaiming, Name: s.Name, PoolName: info.Name, Network: s.Network, Labels: labels, ClaimedAt: time.Now().UTC()}
	if err := p.claims.put(info.ID, cl); err != nil {
		p.giveBack(info.ID, s)
		return engine.Info{ID: id}, false, err
	}
	if err := p.eng.Rename(ctx, info.ID, s.Name); err != nil {
		_ = p.claims.drop(info.ID)
		p.giveBack(info.ID, s)
		if errors.Is(err, engine.ErrConflict) {
			return engine.Info{ID: id}, false, err
		}
		p.log.Warn("warm pool: rename for a claim failed; creating instead", "sandbox", info.Name, "name", s.Name, "err", err)
		return engine.Info{ID: id}, false, ctx.Err()
	}
	info.Name, info.StartedAt = s.Name, cl.ClaimedAt
	if s.Network == "" || s.Network == engine.NetworkNone {
		// Sealed: it stays on no network, and its sockets (served in its
		// pool directory, SocketDir) replace any network.
		return info, true, nil
	}
	if err := p.eng.JoinNetwork(ctx, info.ID, s.Network); err != nil {
		p.log.Warn("warm pool: network join for a claim failed; creating instead", "sandbox", info.Name, "network", s.Network, "err", err)
		p.unclaim(context.WithoutCancel(ctx), info.ID, cl)
		return engine.Info{ID: id}, false, ctx.Err()
	}
	return info, true, nil
}

// giveBack returns an unused sandbox to the idle list.
func (p *Pool) giveBack(id string, s engine.Spec) {
	p.mu.Lock()
	defer p.mu.Unlock()
	k := Key(s)
	p.idle[k] = append(p.idle[k], id)
}

// Confirm marks claims whose containers their swarm's state file now
// holds: from here on a restart keeps them as swarm containers.
func (p *Pool) Confirm(ids ...string) error {
	return p.claims.update(func(m map[string]claim) {
		for _, id := range ids {
			if cl, ok := m[id]; ok {
				cl.Phase = phaseClaimed
				m[id] = cl
			}
		}
	})
}

// Claimed reports whether container id is a claimed pool sandbox.
func (p *Pool) Claimed(id string) bool {
	_, ok := p.claims.get(id)
	return ok
}

// unclaim puts a half-claimed sandbox back into the pool: off every
// network, its pool name again, its record gone. One that cannot be put
// back is removed.
func (p *Pool) unclaim(ctx context.Context, id string, cl claim) {
	p.emptyDir(cl.PoolName) // what a dead daemon served there answers no more
	err := p.eng.LeaveNetworks(ctx, id, engine.NetworkNone)
	if err == nil {
		if info, ierr := p.eng.Inspect(ctx, id); ierr == nil && info.Name != cl.PoolName {
			err = p.eng.Rename(ctx, id, cl.PoolName)
		}
	}
	if err != nil {
		p.log.Warn("warm pool: a half-claimed sandbox cannot go back to the pool; removing it", "sandbox", cl.PoolName, "err", err)
		if rerr := p.eng.Remove(ctx, id); rerr != nil {
			p.log.Warn("warm pool: remove a half-claimed sandbox", "sandbox", cl.PoolName, "err", rerr)
			return // the record stays: the next start tries again
		}
	}
	if err := p.claims.drop(id); err != nil {
		p.log.Warn("warm pool: forget a claim", "sandbox", cl.PoolName, "err", err)
	}
	p.log.Info("warm pool: a half-claimed sandbox is back in the pool", "sandbox", cl.PoolName, "was", cl.Name)
	p.poke()
}

// discard removes a pool sandbox, saying why.
func (p *Pool) discard(ctx context.Context, id, why string) {
	if err := p.eng.Remove(context.WithoutCancel(ctx), id); err != nil {
		p.log.Warn("warm pool: remove a sandbox", "sandbox", id, "why", why, "err", err)
		return
	}
	p.log.Info("warm pool: sandbox removed", "sandbox", id, "why", why)
}

// newName is a pool sandbox's name until its claim.
func newName() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return namePrefix + hex.EncodeToString(b)
}

// SetRepoImage moves repo's pool to spec (its workspace image, package
// workspace) with the number its last start asked for (SetRepo): the
// pool fills sandboxes of that image, which only repo's starts claim
// (the key holds the image). A repository no start told since the
// daemon started (an image adopted from the previous daemon) gets n
// (the daemon's sandbox.warm_pool) until its next start says its own.
func (p *Pool) SetRepoImage(repo string, spec engine.Spec, n int) {
	p.mu.Lock()
	if told, ok := p.repoN[repo]; ok {
		n = told
	}
	p.mu.Unlock()
	p.SetRepo(repo, spec, n)
}

// DropImage stops keeping sandboxes of image for any repository: its
// waiting ones are removed by the next pass, after which the engine lets
// the image go.
func (p *Pool) DropImage(image string) {
	p.mu.Lock()
	for k, t := range p.targets {
		if t.spec.Image == image {
			clear(t.repos)
			for r, rk := range p.repoKey {
				if rk == k {
					delete(p.repoKey, r)
				}
			}
		}
	}
	p.mu.Unlock()
	p.poke()
}

// WaitQuiet returns once no start holds the pool back (Busy), or ctx
// ended: work of the daemon's own (a workspace image's build) waits so.
func (p *Pool) WaitQuiet(ctx context.Context) { p.waitNotBusy(ctx) }
