package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/engine"
	"github.com/aimi-tools/swarm/state"
)

// errForeign marks an object (a container, a state entry, a whole state
// file) that is not the swarm's it was asked about: the daemon leaves it
// alone.
var errForeign = errors.New("not this swarm's; left alone")

// verifyTimeout bounds the look before a stop or removal: an engine that
// does not answer it in time does not answer the stop either, and the
// caller goes on with what it verified when it took the container on.
const verifyTimeout = 15 * time.Second

// RepoID is the identity of the repository directory repo (as ResolveRepo
// names it), labelled org.aimi.repo-id on everything of its swarms: the
// directory's inode. A copy (cp -a, git clone) has another inode; a move
// within one filesystem keeps it. The device number is left out on
// purpose: it may change across a reboot (device-mapper, network and
// overlay filesystems), and the path is compared besides. "" when it
// cannot be read; an object without the label (made before it existed) is
// then judged by its path alone.
func RepoID(repo string) string {
	fi, err := os.Stat(repo)
	if err != nil {
		return ""
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return ""
	}
	return strconv.FormatUint(st.Ino, 10)
}

// ownLabels are the labels every container of the swarm carries: the
// daemon's (instance), the swarm's id and the repository's path.
func (sw *swarm) ownLabels() map[string]string {
	return sw.m.selector(map[string]string{contract.LabelSwarmID: sw.id, contract.LabelProject: sw.repo})
}

// checkOwn says why the container info describes is not the swarm's
// container name ("" for any of its containers): nil when it is.
func (sw *swarm) checkOwn(info engine.Info, name string) error {
	if err := contract.CheckLabels(info.Labels, sw.ownLabels()); err != nil {
		return fmt.Errorf("%w: %v", errForeign, err)
	}
	if !sw.sameRepository(info.Labels) {
		return fmt.Errorf("%w: label %s is %q, want %q (another repository now at %q)", errForeign, contract.LabelRepoID, info.Labels[contract.LabelRepoID], sw.repoID, sw.repo)
	}
	if name != "" && info.Name != name {
		return fmt.Errorf("%w: it is named %q, not %q", errForeign, info.Name, name)
	}
	return nil
}

// verified inspects c's container and returns what the engine says of it
// once it is known to be c: the swarm's, of its repository, of c's name.
// It is called right before the container is stopped or removed, so that
// an id from an edited (or copied) state file never reaches those calls.
// A container the engine does not have is container.ErrNotFound.
func (sw *swarm) verified(ctx context.Context, c *ctr) (engine.Info, error) {
	id := sw.idOf(c)
	ctx, cancel := context.WithTimeout(ctx, verifyTimeout)
	defer cancel()
	info, err := sw.m.eng.Inspect(ctx, id)
	if err != nil {
		return info, err
	}
	if err := sw.checkOwn(info, c.name); err != nil {
		return info, fmt.Errorf("container %q (id %.12s): %w", c.name, id, err)
	}
	return info, nil
}

// foreignSwarm returns an error (api.ErrNoSwarm) when the swarm a state
// file in repo names belongs to another repository: the containers the
// engine has of it, or the swarm the Manager holds, are labelled with
// another path or directory. The state file is then a copy (cp -a of the
// repository) or the repository was moved: commands given this path act
// on nothing, and a start here makes a swarm of its own. infos are the
// engine's containers of the swarm (any repository).
func (m *Manager) foreignSwarm(repo, repoID, swarmID string, infos []engine.Info) error {
	owners := map[string]string{} // path -> repo id ("" unknown)
	for _, in := range infos {
		p, id := in.Labels[contract.LabelProject], in.Labels[contract.LabelRepoID]
		if p != repo || id != "" && repoID != "" && id != repoID {
			owners[p] = id
		}
	}
	m.mu.Lock()
	for p, sw := range m.swarms {
		if sw.id == swarmID && p != repo {
			owners[p] = sw.repoID
		}
	}
	m.mu.Unlock()
	if len(owners) == 0 {
		return nil
	}
	other := slices.Sorted(maps.Keys(owners))[0]
	if id := owners[other]; other != repo && id != "" && id == repoID && RepoID(other) != id {
		return fmt.Errorf("%w: %q was moved from %q, where its swarm %s was started; the swarm stays bound to that path: move the repository back to control it (or stop and clean it up before moving)", api.ErrNoSwarm, repo, other, swarmID)
	}
	if other == repo {
		return fmt.Errorf("%w: the swarm %s that %q's state file names belongs to another repository that was at this path before; 'aimi swarm start' here starts a swarm of its own", api.ErrNoSwarm, swarmID, repo)
	}
	return fmt.Errorf("%w: the state file of %q names swarm %s, which belongs to %q: this repository is a copy of it (or shares its state file); give that swarm's commands --repo %q, or start a swarm of this repository's own with 'aimi swarm start'", api.ErrNoSwarm, repo, swarmID, other, other)
}

// entryContainer checks the container a state entry e names, given what
// the engine's list of the swarm's containers had under its id (info,
// found). Found there, it must carry the entry's name. Not found, the id
// may still name a container (the engine takes short ids and names too):
// one of this swarm under the entry's name is taken (with its full id),
// any other is errForeign; none at all is not found (a lost container).
func (sw *swarm) entryContainer(ctx context.Context, e *state.Container, info engine.Info, found bool) (engine.Info, bool, error) {
	if found {
		if err := sw.checkOwn(info, e.ContainerName); err != nil {
			return info, false, fmt.Errorf("id %.12s: %w", e.ContainerID, err)
		}
		return info, true, nil
	}
	if e.ContainerID == "" {
		return engine.Info{}, false, nil
	}
	in, err := sw.m.eng.Inspect(ctx, e.ContainerID)
	switch {
	case errors.Is(err, engine.ErrNotFound):
		return engine.Info{}, false, nil
	case err != nil:
		return engine.Info{}, false, fmt.Errorf("look up the container of state entry %q: %w", e.ContainerName, err)
	}
	if err := sw.checkOwn(in, e.ContainerName); err != nil {
		return in, false, fmt.Errorf("id %.12s: %w", e.ContainerID, err)
	}
	return in, true, nil
}

// removeVerified removes c's container once verified (see verified); one
// the engine no longer has is removed already.
func (sw *swarm) removeVerified(ctx context.Context, c *ctr) error {
	info, err := sw.verified(ctx, c)
	switch {
	case errors.Is(err, engine.ErrNotFound):
		sw.m.forgetNet(sw.sandbox(c), sw.m.netDirOf(sw.idOf(c)))
		return nil
	case err != nil:
		return err
	}
	dir := sw.m.netDirOf(info.ID)
	err = sw.m.eng.Remove(ctx, info.ID)
	if err != nil && !errors.Is(err, engine.ErrLeftOnNode) {
		return err
	}
	sw.m.forgetNet(sw.sandbox(c), dir)
	return err // ErrLeftOnNode: removed, with what a node kept
}

// removeConcurrency bounds the removals of one cleanup that run at once.
const removeConcurrency = 8

// removeAll removes the containers of cs (removeVerified), up to
// removeConcurrency at once; errs[i] is cs[i]'s.
func (sw *swarm) removeAll(ctx context.Context, cs []*ctr) (errs []error) {
	errs = make([]error, len(cs))
	var g errgroup.Group
	g.SetLimit(removeConcurrency)
	for i, c := range cs {
		g.Go(func() error {
			errs[i] = sw.removeVerified(ctx, c)
			return nil
		})
	}
	_ = g.Wait()
	return errs
}

// foreignEntry is why adoption left the state entry name alone, or "".
func (sw *swarm) foreignEntry(name string) string {
	for _, k := range sw.foreign {
		if k.Name == name {
			return k.Reason
		}
	}
	return ""
}

// sameRepository reports whether labels of a container of this repository's
// path (an earlier swarm's, say) are of this very repository: a container
// made for another repository that was at this path before is not.
func (sw *swarm) sameRepository(labels map[string]string) bool {
	id := labels[contract.LabelRepoID]
	return labels[contract.LabelProject] == sw.repo && (id == "" || sw.repoID == "" || id == sw.repoID)
}
