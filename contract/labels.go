package contract

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
