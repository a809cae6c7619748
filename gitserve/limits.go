package gitserve

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/internal/svclisten"
)

// Defaults of Limits. A sandbox is untrusted: whatever it can make the
// service hold (connections, git processes, disk, time) is bounded per
// container and in total, so that one flooding or oversized sandbox slows
// only itself.
const (
	DefaultMaxPush                 = 100 << 20 // one push's pack, as git receives it
	DefaultMaxMirror               = 1 << 30   // what one swarm's pushes may add to its mirror
	DefaultMaxConns                = 1024      // connections held at once, every source
	DefaultMaxConnsPerPeer         = 128       // from one source address
	DefaultMaxBackends             = 32        // git http-backend processes at once
	DefaultMaxBackendsPerContainer = 4         // of one container's token

	// FDsPerBackend is what one running git http-backend holds of the
	// daemon's file descriptors besides its connection: the pipes of its
	// stdout and stderr, the spooled body, the process handle, with one
	// to spare. The daemon sizes MaxConns from its file limit with it.
	FDsPerBackend = 5

	// backendWait is how long a request waits for a backend slot before
	// it is answered 503 (git, and the runner's relay, try again later).
	backendWait = time.Minute
	// bodyTime bounds reading a request's body: a sandbox trickling a
	// push holds a connection and a slot, of its own share only, and not
	// for ever.
	bodyTime = 10 * time.Minute
	// requestTime bounds a whole request, its answer included (a clone
	// of the largest repository over a bridge takes a few minutes).
	requestTime = 30 * time.Minute
	// maxFetchBody bounds the body of a clone or fetch (the objects the
	// client wants and has): a few MiB in a long negotiation.
	maxFetchBody = 64 << 20
)

// Limits bound what the containers can take of the service. Zero fields
// take their defaults.
type Limits struct {
	// MaxPush is the largest push, in bytes of the (inflated) request body
	// git receive-pack gets: a larger one is refused with a message that
	// names git.max_push, and nothing of it reaches the mirror.
	MaxPush int64
	// MaxMirror is how much the pushes of one swarm's containers may add
	// to the swarm's mirror on disk, in bytes (the user's own history,
	// cloned into it, does not count). A push that would pass it is
	// refused with a message that names git.max_mirror.
	MaxMirror int64
	// MaxConns and MaxConnsPerPeer bound the connections held at once, in
	// total and from one source address (a container; on a cluster, a
	// node). Connections past them are closed as they are accepted.
	MaxConns, MaxConnsPerPeer int
	// MaxBackends and MaxBackendsPerContainer bound the git http-backend
	// processes at once, in total and per container token; a request
	// waits for a slot (backendWait), then gets 503.
	MaxBackends, MaxBackendsPerContainer int
	// MaxWorkspace bounds a ready-made workspace on the daemon's disk (its
	// files and .git, counted from git before any is written; see
	// workspaceCost): a larger one is not made and the runner clones in
	// its own sandbox instead. At most contract.MaxWorkspaceBytes (the
	// runner's own bound), which is the default.
	MaxWorkspace int64
}

func (l Limits) withDefaults() Limits {
	def := func(v *int64, d int64) {
		if *v <= 0 {
			*v = d
		}
	}
	defInt := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&l.MaxPush, DefaultMaxPush)
	def(&l.MaxMirror, DefaultMaxMirror)
	def(&l.MaxWorkspace, contract.MaxWorkspaceBytes)
	l.MaxWorkspace = min(l.MaxWorkspace, contract.MaxWorkspaceBytes)
	defInt(&l.MaxConns, DefaultMaxConns)
	defInt(&l.MaxConnsPerPeer, DefaultMaxConnsPerPeer)
	defInt(&l.MaxBackends, DefaultMaxBackends)
	defInt(&l.MaxBackendsPerContainer, DefaultMaxBackendsPerContainer)
	l.MaxConnsPerPeer = min(l.MaxConnsPerPeer, l.MaxConns)
	l.MaxBackendsPerContainer = min(l.MaxBackendsPerContainer, l.MaxBackends)
	return l
}

// FileDescriptors is how many of the daemon's file descriptors the service
// may hold at most under l: every connection and every backend.
func (l Limits) FileDescriptors() int {
	l = l.withDefaults()
	return l.MaxConns + l.MaxBackends*FDsPerBackend
}

// backendSlots bounds the git http-backend processes running at once, per
// container and in total.
type backendSlots struct {
	total   chan struct{}
	per     int
	mu      sync.Mutex
	byGrant map[contract.Sandbox]chan struct{}
}

func newBackendSlots(l Limits) *backendSlots {
	return &backendSlots{total: make(chan struct{}, l.MaxBackends), per: l.MaxBackendsPerContainer, byGrant: map[contract.Sandbox]chan struct{}{}}
}

// acquire waits (at most backendWait, or until ctx ends) for a slot of
// key's and one of the total; release gives both back.
func (b *backendSlots) acquire(ctx context.Context, key contract.Sandbox) (release func(), ok bool) {
	b.mu.Lock()
	own := b.byGrant[key]
	if own == nil {
		own = make(chan struct{}, b.per)
		b.byGrant[key] = own
	}
	b.mu.Unlock()
	t := time.NewTimer(backendWait)
	defer t.Stop()
	select {
	case own <- struct{}{}:
	case <-t.C:
		return nil, false
	case <-ctx.Done():
		return nil, false
	}
	select {
	case b.total <- struct{}{}:
	case <-t.C:
		<-own
		return nil, false
	case <-ctx.Done():
		<-own
		return nil, false
	}
	return func() { <-b.total; <-own }, true
}

// forget drops the per-container slots of swarm (Forget).
func (b *backendSlots) forget(swarm string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for k := range b.byGrant {
		if k.Swarm == swarm {
			delete(b.byGrant, k)
		}
	}
}

// bounds is the Service's share of this file: its limits and what counts
// against them.
type bounds struct {
	limits Limits
	conns  *svclisten.Conns
	slots  *backendSlots
	quota  mirrorQuota
}

// initBounds sets the limits up and empties the spool directory (bodies
// of requests under way when the daemon stopped).
func (s *Service) initBounds(l Limits) error {
	s.limits = l.withDefaults()
	s.conns = svclisten.NewConns("git service", s.limits.MaxConns, s.limits.MaxConnsPerPeer, s.log)
	s.slots = newBackendSlots(s.limits)
	s.quota.reserved = map[string]int64{}
	dir := filepath.Join(s.dir, spoolDir)
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("git service: empty the spool directory %s: %w", dir, err)
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		return fmt.Errorf("git service: make the spool directory %s: %w", dir, err)
	}
	s.log.Info("git service limits", "maxPush", s.limits.MaxPush, "maxMirror", s.limits.MaxMirror,
		"maxConns", s.limits.MaxConns, "maxConnsPerSource", s.limits.MaxConnsPerPeer,
		"maxBackends", s.limits.MaxBackends, "maxBackendsPerContainer", s.limits.MaxBackendsPerContainer,
		"maxWorkspace", s.limits.MaxWorkspace)
	return nil
}
