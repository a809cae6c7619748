package workspace

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/engine"
)

// DefaultMaxRepos is sandbox.warm_pool_repos's default.
const DefaultMaxRepos = 2

// buildTime bounds one image's build (the tree's making included).
const buildTime = 10 * time.Minute

// retireGrace is how long an image stays after a newer one replaced it: a
// start that looked it up just before may still be creating from it (the
// engine keeps it only for containers that exist).
const retireGrace = 2 * time.Minute

// Engine is what the manager needs of the engine: its images, and its
// containers to find a killed daemon's build containers.
type Engine interface {
	engine.Images
	List(ctx context.Context, labels map[string]string) ([]engine.Info, error)
	Remove(ctx context.Context, id string) error
}

// Tree is the workspace a repository's image holds: a tar of its
// checkout with its .git (origin contract.WorkspaceOrigin) at Commit.
type Tree struct {
	Commit string
	Tar    io.ReadCloser
}

// TreeFunc makes the Tree of a repository's default branch.
type TreeFunc func(ctx context.Context) (Tree, error)

// Diff is how far a repository's default branch moved from an image's
// commit (gitserve.DeltaSize).
type Diff struct {
	Tip      string
	Descends bool
	Paths    int
	Bytes    int64
}

// DiffFunc measures the difference from commit to the default branch's
// tip; an error counts as a large one.
type DiffFunc func(ctx context.Context, commit string) (Diff, error)

// Options configure a Manager.
type Options struct {
	// Labels are the daemon's (its instance): every image and build
	// container carries them, and only those are the manager's.
	Labels map[string]string
	// MaxRepos bounds the repositories with an image (DefaultMaxRepos).
	MaxRepos int
	// Quiet returns once no start is in progress (the pool's Busy): a
	// build never takes the cores and the engine from a start.
	Quiet func(ctx context.Context)
	// Ready is told each repository's new image (the pool fills
	// sandboxes of it); Gone each image no repository uses any more.
	Ready  func(repo, image string)
	Gone   func(repo, image string)
	Logger *slog.Logger
}

// entry is a repository's current image.
type entry struct {
	ref, id, base, commit string
	used                  time.Time
}

// Manager keeps the workspace images (see the package doc).
type Manager struct {
	eng  Engine
	opts Options
	log  *slog.Logger

	mu       sync.Mutex
	repos    map[string]*entry
	retired  map[string]time.Time // image id -> when it stopped being a repository's
	building map[string]bool
	making   map[string]bool // refs a build is committing: no repository's yet, never swept
	said     map[string]bool // what was logged once
	wg       sync.WaitGroup
	life     context.Context // ended by Close: no build starts or goes on
	end      context.CancelFunc
}

// New makes a Manager; nothing is built before Prepare.
func New(eng Engine, opts Options) *Manager {
	if opts.MaxRepos <= 0 {
		opts.MaxRepos = DefaultMaxRepos
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Quiet == nil {
		opts.Quiet = func(context.Context) {}
	}
	life, end := context.WithCancel(context.Background())
	return &Manager{eng: eng, opts: opts, log: opts.Logger, repos: map[string]*entry{}, retired: map[string]time.Time{},
		building: map[string]bool{}, making: map[string]bool{}, said: map[string]bool{}, life: life, end: end}
}

// labels are the manager's selector, with extra.
func (m *Manager) labels(extra map[string]string) map[string]string {
	l := maps.Clone(m.opts.Labels)
	if l == nil {
		l = map[string]string{}
	}
	l[contract.LabelWorkspace] = "true"
	maps.Copy(l, extra)
	return l
}

// digest is a short, tag-safe digest of s.
func digest(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:6])
}

// Image is the workspace image of repo built on base (the sandbox image a
// start would use), if there is one on the image base names now, and the
// commit its workspace is at.
func (m *Manager) Image(ctx context.Context, repo, base string) (image, commit string, ok bool) {
	m.mu.Lock()
	e := m.repos[repo]
	m.mu.Unlock()
	if e == nil {
		return "", "", false
	}
	id, err := m.eng.ImageID(ctx, base)
	if err != nil || id == "" || id != e.base {
		return "", "", false
	}
	if cur, err := m.eng.ImageID(ctx, e.ref); err != nil || cur != e.id {
		return "", "", false // removed under us (by hand): the cold path, and a build at the start's end
	}
	m.mu.Lock()
	e.used = time.Now()
	m.mu.Unlock()
	return e.ref, e.commit, true
}

// once logs msg at info once per key (a fallback said once).
func (m *Manager) once(key, msg string, args ...any) {
	m.mu.Lock()
	said := m.said[key]
	m.said[key] = true
	m.mu.Unlock()
	if !said {
		m.log.Info(msg, args...)
	}
}

// Prepare builds repo's image on base in the background, once the
// starts are over, unless it holds tree's commit already or, with diff,
// the tip moved too little from its commit to be worth a new image and
// new pool sandboxes (small). tree is made only then.
func (m *Manager) Prepare(repo, base string, tree TreeFunc, diff DiffFunc) {
	m.mu.Lock()
	if m.building[repo] || m.life.Err() != nil {
		m.mu.Unlock()
		return
	}
	m.building[repo] = true
	m.wg.Add(1)
	m.mu.Unlock()
	go func() {
		defer m.wg.Done()
		defer func() {
			m.mu.Lock()
			delete(m.building, repo)
			m.mu.Unlock()
		}()
		ctx, cancel := context.WithTimeout(m.life, buildTime)
		defer cancel()
		m.opts.Quiet(ctx)
		if err := m.build(ctx, repo, base, tree, diff); err != nil {
			m.once("build:"+repo+":"+err.Error(), "no workspace image for this repository; its sandboxes get their workspace as before",
				"repo", repo, "err", err)
		}
	}()
}

// Wait waits for the builds under way (tests, shutdown).
func (m *Manager) Wait() { m.wg.Wait() }

// Close is the daemon's shutdown: the builds under way stop (each removes
// its build container); the repositories' current images (at most
// MaxRepos) stay for the next daemon to adopt (Cleanup), and every other
// image no container uses goes (those its sandboxes use, the next
// daemon's sweep removes once they are gone).
func (m *Manager) Close(ctx context.Context) {
	m.mu.Lock()
	m.end()
	m.mu.Unlock()
	m.wg.Wait()
	m.mu.Lock()
	clear(m.retired)
	m.mu.Unlock()
	m.Sweep(ctx)
}

// build makes repo's image of tree on base (nothing when the current one
// is of the same base and commit), then makes it repo's and evicts the
// least recently used repository past MaxRepos.
func (m *Manager) build(ctx context.Context, repo, base string, tree TreeFunc, diff DiffFunc) error {
	baseID, err := m.eng.ImageID(ctx, base)
	if err != nil || baseID == "" {
		return fmt.Errorf("the sandbox image %s: %v", base, cmpErr(err, errors.New("not found")))
	}
	if m.keep(ctx, repo, baseID, diff) {
		return nil
	}
	t, err := tree(ctx)
	if err != nil {
		return fmt.Errorf("make its tree: %w", err)
	}
	defer t.Tar.Close()
	m.mu.Lock()
	cur := m.repos[repo]
	m.mu.Unlock()
	if cur != nil && cur.base == baseID && cur.commit == t.Commit {
		if id, err := m.eng.ImageID(ctx, cur.ref); err == nil && id == cur.id {
			return nil
		}
	}
	ref := m.ref(repo, t.Commit)
	start := time.Now()
	m.mu.Lock()
	m.making[ref] = true
	m.mu.Unlock()
	defer func() {
		m.mu.Lock()
		delete(m.making, ref)
		m.mu.Unlock()
	}()
	id, err := m.eng.BuildImage(ctx, engine.ImageBuild{
		Base: base, Ref: ref, Dir: contract.DefaultWorkspace, Tree: t.Tar,
		// Every sandbox of the image inherits its labels, a pool
		// sandbox's included: the repository's path is not LabelProject.
		Labels: m.labels(map[string]string{contract.LabelWorkspaceCommit: t.Commit, contract.LabelWorkspaceBase: baseID,
			contract.LabelWorkspaceBaseRef: base, contract.LabelWorkspaceRepo: repo}),
		BuildName: contract.WorkspaceBuildPrefix + digest(ref+time.Now().String()),
		Env:       []string{contract.EnvWorkspaceBase + "=" + t.Commit},
	})
	if err != nil {
		return err
	}
	m.log.Info("workspace image built", "repo", repo, "image", ref, "commit", t.Commit, "took", time.Since(start).Round(time.Millisecond))
	m.mu.Lock()
	m.repos[repo] = &entry{ref: ref, id: id, base: baseID, commit: t.Commit, used: time.Now()}
	evicted := m.evictLocked()
	if cur != nil && cur.id != id {
		m.retired[cur.id] = time.Now()
	}
	for _, e := range evicted {
		m.retired[e.id] = time.Now()
	}
	m.mu.Unlock()
	if m.opts.Ready != nil {
		m.opts.Ready(repo, ref)
	}
	if cur != nil && cur.ref != ref && m.opts.Gone != nil {
		m.opts.Gone(repo, cur.ref)
	}
	for r, e := range evicted {
		m.log.Info("workspace image of a repository no longer kept (sandbox.warm_pool_repos)", "repo", r, "image", e.ref)
		if m.opts.Gone != nil {
			m.opts.Gone(r, e.ref)
		}
	}
	m.Sweep(ctx)
	return nil
}

// evictLocked drops the least recently used repositories past MaxRepos.
func (m *Manager) evictLocked() map[string]*entry {
	out := map[string]*entry{}
	for len(m.repos) > m.opts.MaxRepos {
		repos := slices.Collect(maps.Keys(m.repos))
		oldest := slices.MinFunc(repos, func(a, b string) int { return m.repos[a].used.Compare(m.repos[b].used) })
		out[oldest] = m.repos[oldest]
		delete(m.repos, oldest)
	}
	return out
}

// Sweep removes the manager's images no repository holds now: the engine
// refuses those a container still uses (engine.ErrImageInUse), which a
// later sweep removes.
func (m *Manager) Sweep(ctx context.Context) {
	ims, err := m.eng.ListImages(ctx, m.labels(nil))
	if err != nil {
		m.log.Warn("workspace images: list", "err", err)
		return
	}
	m.mu.Lock()
	keep := map[string]bool{}
	for _, e := range m.repos {
		keep[e.id] = true
	}
	for id, at := range m.retired {
		if time.Since(at) < retireGrace {
			keep[id] = true
		} else {
			delete(m.retired, id)
		}
	}
	for _, im := range ims {
		if slices.ContainsFunc(im.Tags, func(tag string) bool { return m.making[tag] }) {
			keep[im.ID] = true
		}
	}
	m.mu.Unlock()
	for _, im := range ims {
		if keep[im.ID] {
			continue
		}
		err := m.eng.RemoveImage(ctx, im.ID)
		switch {
		case err == nil:
			m.log.Info("workspace image removed", "image", im.ID, "tags", im.Tags)
		case errors.Is(err, engine.ErrImageInUse):
			m.log.Debug("workspace image kept while a sandbox uses it", "image", im.ID)
		default:
			m.log.Warn("workspace images: remove", "image", im.ID, "err", err)
		}
	}
}

// Cleanup is the daemon's start: the build containers a killed daemon
// left go, the images a previous daemon left are adopted (adopt), and
// every other image of the manager that no sandbox uses goes. Announce
// tells Ready the adopted ones.
func (m *Manager) Cleanup(ctx context.Context) {
	cs, err := m.eng.List(ctx, m.labels(nil))
	if err != nil {
		m.log.Warn("workspace images: list build containers", "err", err)
	}
	for _, c := range cs {
		if !strings.HasPrefix(strings.TrimPrefix(c.Name, "/"), contract.WorkspaceBuildPrefix) {
			continue // a sandbox of a workspace image: it carries the image's labels
		}
		if err := m.eng.Remove(ctx, c.ID); err != nil {
			m.log.Warn("workspace images: remove a build container", "container", c.Name, "err", err)
		}
	}
	m.adopt(ctx)
	m.Sweep(ctx)
}

// Run sweeps every interval until ctx ends: an image refused while its
// last sandboxes lived goes once they are gone.
func (m *Manager) Run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			m.Sweep(ctx)
		}
	}
}

func cmpErr(err, or error) error {
	if err != nil {
		return err
	}
	return or
}
