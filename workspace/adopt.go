package workspace

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/engine"
)

// Past these the difference between an image's commit and the tip costs
// every sandbox of the image more than a new image and new pool
// sandboxes cost once (a rebuild); under them the image and its pool
// sandboxes stay, and the runners apply the difference (a start's tip is
// usually the image's plus the task files the user just committed).
const (
	RebuildPaths = 256
	RebuildBytes = 8 << 20
)

// small reports whether d is under the rebuild thresholds.
func small(d Diff) bool {
	return d.Descends && d.Paths <= RebuildPaths && d.Bytes <= RebuildBytes
}

// ref is the tag of repo's image at commit.
func (m *Manager) ref(repo, commit string) string {
	return fmt.Sprintf("%s:%s-%s-%.12s", contract.WorkspaceImageRepo, digest(fmt.Sprint(m.opts.Labels)), digest(repo), commit)
}

// keep reports whether repo's current image (on baseID, still there)
// stays although the tip moved: diff says it moved little (small). The
// decision is logged once per build asked for.
func (m *Manager) keep(ctx context.Context, repo, baseID string, diff DiffFunc) bool {
	m.mu.Lock()
	cur := m.repos[repo]
	m.mu.Unlock()
	if diff == nil || cur == nil || cur.base != baseID {
		return false
	}
	if id, err := m.eng.ImageID(ctx, cur.ref); err != nil || id != cur.id {
		return false
	}
	d, err := diff(ctx, cur.commit)
	switch {
	case err != nil:
		m.log.Info("workspace image rebuilt: its difference from the tip could not be measured", "repo", repo, "image", cur.ref, "err", err)
		return false
	case d.Tip == cur.commit:
		return true
	case small(d):
		m.log.Info("workspace image stays at its commit: the tip moved little", "repo", repo, "image", cur.ref,
			"commit", cur.commit, "tip", d.Tip, "paths", d.Paths, "bytes", d.Bytes)
		return true
	}
	m.log.Info("workspace image rebuilt: the tip moved far from its commit", "repo", repo, "image", cur.ref, "commit", cur.commit,
		"tip", d.Tip, "descends", d.Descends, "paths", d.Paths, "bytes", d.Bytes, "maxPaths", RebuildPaths, "maxBytes", RebuildBytes)
	return false
}

// adopt makes the images a previous daemon of the same labels left (at
// its shutdown, or killed: an image exists only once its commit
// succeeded) the repositories' current ones: per repository the newest
// whose sandbox image's reference still names the image it was built on,
// and of those the MaxRepos newest. The others are left to Sweep.
func (m *Manager) adopt(ctx context.Context) {
	ims, err := m.eng.ListImages(ctx, m.labels(nil))
	if err != nil {
		m.log.Warn("workspace images: list to adopt", "err", err)
		return
	}
	best := map[string]engine.Image{}
	for _, im := range ims {
		if !m.adoptable(ctx, im) {
			continue
		}
		repo := im.Labels[contract.LabelWorkspaceRepo]
		if b, ok := best[repo]; !ok || im.Created.After(b.Created) {
			best[repo] = im
		}
	}
	repos := slices.SortedFunc(maps.Keys(best), func(a, b string) int { return best[b].Created.Compare(best[a].Created) })
	m.mu.Lock()
	defer m.mu.Unlock()
	for i, repo := range repos {
		im := best[repo]
		if i >= m.opts.MaxRepos || m.repos[repo] != nil {
			continue
		}
		commit := im.Labels[contract.LabelWorkspaceCommit]
		m.repos[repo] = &entry{ref: m.ref(repo, commit), id: im.ID, base: im.Labels[contract.LabelWorkspaceBase], commit: commit, used: im.Created}
		m.log.Info("workspace image adopted", "repo", repo, "image", m.ref(repo, commit), "commit", commit)
	}
}

// adoptable reports whether im is a complete image of this manager that a
// start could use: its labels name a repository and commit, it carries
// the tag this manager gives such an image, and the sandbox image it was
// built on is still the one its reference names.
func (m *Manager) adoptable(ctx context.Context, im engine.Image) bool {
	l := im.Labels
	repo, commit, base, baseRef := l[contract.LabelWorkspaceRepo], l[contract.LabelWorkspaceCommit], l[contract.LabelWorkspaceBase], l[contract.LabelWorkspaceBaseRef]
	if repo == "" || commit == "" || base == "" || baseRef == "" || !slices.Contains(im.Tags, m.ref(repo, commit)) {
		return false
	}
	id, err := m.eng.ImageID(ctx, baseRef)
	if err != nil || id != base {
		m.log.Info("workspace image not adopted: its sandbox image changed", "repo", repo, "image", im.ID, "sandboxImage", baseRef)
		return false
	}
	return true
}

// Announce tells Ready each repository's current image: after Cleanup,
// the adopted ones, for the pool to keep sandboxes of them at once.
func (m *Manager) Announce() {
	if m.opts.Ready == nil {
		return
	}
	m.mu.Lock()
	cur := map[string]string{}
	for repo, e := range m.repos {
		cur[repo] = e.ref
	}
	m.mu.Unlock()
	for repo, ref := range cur {
		m.opts.Ready(repo, ref)
	}
}
