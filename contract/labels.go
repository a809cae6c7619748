package contract

import (
	"fmt"
	"maps"
	"slices"
)

// Label keys aimid puts on every container and network it creates.
const (
	// LabelSandbox marks a resource as created by aimi ("true").
	LabelSandbox = "org.aimi.sandbox"
	// LabelSwarmID holds the swarm's id.
	LabelSwarmID = "org.aimi.swarm-id"
	// LabelTaskFile holds the repo-relative path of the task file the
	// container runs.
	LabelTaskFile = "org.aimi.task-file"
	// LabelProject holds the absolute path of the project repository.
	LabelProject = "org.aimi.project"
	// LabelRepoID holds the identity of the repository's directory (its
	// inode) next to LabelProject's path: a copy of the repository (cp -a,
	// state file included) has another, a moved one keeps it under a new
	// path. A swarm's objects are its repository's only when both match.
	LabelRepoID = "org.aimi.repo-id"
	// LabelMaxContainers keeps the swarm's container limit across a daemon
	// restart, since the state file has no field for it.
	LabelMaxContainers = "org.aimi.max-containers"
	// LabelGitMode is "local" or "remote": after a restart, pending
	// containers of a local-mode swarm still need a git grant.
	LabelGitMode = "org.aimi.git-mode"
	// LabelBranch lets a lost state file be rebuilt from labels alone.
	LabelBranch = "org.aimi.branch"
	// LabelRepoURL is the repoUrl the task-request carries (no secret in
	// it), so a container created before a daemon restart and started after
	// it gets the same one.
	LabelRepoURL = "org.aimi.repo-url"
	// LabelDaemon holds the instance name of the aimid that created the
	// resource, so daemons sharing one engine keep apart.
	LabelDaemon = "org.aimi.daemon"
	// LabelSwarmObject says what a Swarm mode config or secret of a
	// sandbox holds (spec, request, env, file, network).
	LabelSwarmObject = "org.aimi.swarm-object"
	// LabelContainer holds the sandbox's container name on its Swarm mode
	// service, configs, secrets and network (service names are shorter
	// than container names may be).
	LabelContainer = "org.aimi.container"
	// LabelWarm marks a warm-pool sandbox ("pool"): created and started
	// with no network, no name of a task, no token and no secret, waiting
	// to be claimed (docs/warm-pool.md). Labels cannot change after a
	// create, so a claimed sandbox keeps it; the daemon's claim record
	// gives it the labels of a created container.
	LabelWarm = "org.aimi.warm"
	// LabelWarmKey holds the digest of the sandbox settings (image, limits,
	// runtime) a pool sandbox was created with: a claim takes only one
	// whose key is its spec's, and the pool replaces the others.
	LabelWarmKey = "org.aimi.warm-key"
	// LabelWorkspace ("true") marks a workspace image (package
	// workspace). A container inherits its image's labels, so every
	// sandbox of one carries it too: never select containers by it.
	LabelWorkspace = "org.aimi.workspace"
	// LabelWorkspaceCommit holds the commit a workspace image's tree is at.
	LabelWorkspaceCommit = "org.aimi.workspace-commit"
	// LabelWorkspaceBase holds the id of the sandbox image a workspace
	// image was built on.
	LabelWorkspaceBase = "org.aimi.workspace-base"
	// LabelWorkspaceBaseRef holds the reference (name) of the sandbox
	// image a workspace image was built on: a next daemon adopts the
	// image only while that name still names LabelWorkspaceBase's id.
	LabelWorkspaceBaseRef = "org.aimi.workspace-base-ref"
	// LabelWorkspaceRepo holds the path of the repository a workspace
	// image holds, for a next daemon to adopt it. Not LabelProject: every
	// sandbox of the image inherits it, a pool sandbox's (no repository's
	// container) included; nothing selects containers by this one.
	LabelWorkspaceRepo = "org.aimi.workspace-repo"
)

// Label keys of the marker container by which a daemon holds its instance
// name on the engine (daemon/instancelock): the instance, and who holds it.
const (
	LabelInstanceLock          = "org.aimi.instance-lock"
	LabelInstanceLockPID       = "org.aimi.instance-lock.pid"
	LabelInstanceLockSocket    = "org.aimi.instance-lock.socket"
	LabelInstanceLockDataDir   = "org.aimi.instance-lock.data-dir"
	LabelInstanceLockHost      = "org.aimi.instance-lock.host"
	LabelInstanceLockStarted   = "org.aimi.instance-lock.started"
	LabelInstanceLockBootID    = "org.aimi.instance-lock.boot-id"
	LabelInstanceLockPIDNS     = "org.aimi.instance-lock.pid-ns"
	LabelInstanceLockPIDStart  = "org.aimi.instance-lock.pid-start"
	LabelInstanceLockContainer = "org.aimi.instance-lock.container"
	// LabelInstanceLockImage marks the empty image markers are made from.
	LabelInstanceLockImage = "org.aimi.instance-lock-image"
)

// CheckLabels reports the first label (in key order) of want that have
// does not carry with the same value: nil when an object carries them all.
// Every object a daemon stops, removes or follows is checked against its
// expected labels this way, right before it is touched.
func CheckLabels(have, want map[string]string) error {
	for _, k := range slices.Sorted(maps.Keys(want)) {
		got, ok := have[k]
		switch {
		case !ok:
			return fmt.Errorf("label %s is missing, want %q", k, want[k])
		case got != want[k]:
			return fmt.Errorf("label %s is %q, want %q", k, got, want[k])
		}
	}
	return nil
}
