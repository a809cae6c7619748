package contract

// WorkspacePath is the path, on the local-mode git service's listener,
// where acp-runner fetches its workspace ready-made instead of cloning it:
// a tar of a shallow clone of the container's branch (or of the default
// branch when the repository does not hold it yet), checked out, its
// origin named WorkspaceOrigin. The request carries the container's git
// token and its branch in WorkspaceBranchHeader; the answer says in
// WorkspaceExistsHeader ("true" or "false") which of the two it holds.
// Any other answer than 200 means: clone as before.
const WorkspacePath = "/_aimi/workspace"

// WorkspaceBranchHeader names the branch the runner works on; the service
// refuses a workspace for another branch than the token's.
const WorkspaceBranchHeader = "Aimi-Branch"

// WorkspaceExistsHeader says whether the workspace holds the requested
// branch ("true", a resume) or the default branch it starts from
// ("false").
const WorkspaceExistsHeader = "Aimi-Branch-Exists"

// WorkspaceOrigin is the origin URL a ready-made workspace's .git/config
// names, for the runner to replace with its own repository URL: one
// workspace serves every container of a swarm, whatever address each
// reaches the service at.
const WorkspaceOrigin = "https://aimi.invalid/origin.git"

// MaxWorkspaceBytes bounds a ready-made workspace (its files and its
// .git): a larger one is not made, and the runner clones instead.
const MaxWorkspaceBytes = 1 << 30

// WorkspaceBaseHeader carries, from a runner whose image already holds a
// workspace (EnvWorkspaceBase), the commit that workspace is checked out
// at. The service then sends no tar: its answer (200, no body) says in
// WorkspaceSameHeader whether the branch's tip (or the default branch's,
// WorkspaceExistsHeader) is that commit, and names the tip in
// WorkspaceTipHeader, which the runner fetches when it is not.
const (
	WorkspaceBaseHeader = "Aimi-Workspace-Base"
	WorkspaceSameHeader = "Aimi-Workspace-Same"
	WorkspaceTipHeader  = "Aimi-Workspace-Tip"
)

// EnvWorkspaceBase is set in a workspace image's environment (package
// workspace): the commit its workspace (contract.DefaultWorkspace, with
// its .git, origin WorkspaceOrigin) is checked out at, on the
// repository's default branch.
const EnvWorkspaceBase = "AIMI_WORKSPACE_BASE"

// WorkspaceImageRepo is the repository part of every workspace image's
// tag: the sandbox image plus one layer holding a repository's workspace.
// A sandbox of such an image keeps its workspace in its writable layer
// (no volume at DefaultWorkspace: a volume would copy the tree).
const WorkspaceImageRepo = "aimi-workspace"

// IsWorkspaceImage reports whether image names a workspace image.
func IsWorkspaceImage(image string) bool {
	return len(image) > len(WorkspaceImageRepo) && image[:len(WorkspaceImageRepo)+1] == WorkspaceImageRepo+":"
}

// WorkspaceBuildPrefix begins the name of the container that builds a
// workspace image (never started; a killed daemon's is removed at the
// next start by it and the daemon's labels). Not a label: the engine's
// commit copies the container's labels onto the image, and from there
// onto every sandbox of it.
const WorkspaceBuildPrefix = "aimi-workspace-build-"

// WorkspaceDeletedEntry is the first entry of a workspace's difference
// (the git service's answer to WorkspaceBaseHeader when the tip moved and
// WorkspaceDeltaHeader says "true"): the paths the tip deleted, NUL
// separated. The runner removes them and writes the other entries over
// its workspace; the entry itself is not written.
const WorkspaceDeletedEntry = ".aimi-deleted"

// WorkspaceDeltaHeader says whether the answer's body is the difference
// ("true") or empty (the runner fetches the tip with git).
const WorkspaceDeltaHeader = "Aimi-Workspace-Delta"

// WorkspaceSparseHeader, sent with WorkspaceBaseHeader ("true"), says the
// runner applies a sparse difference: when its branch is new (it starts
// at the default branch's tip), the task files the tip added since the
// image's commit are not written into its work tree, only its
// own. The others stay in its index (marked skip-worktree: git neither
// shows them missing nor commits their absence) and in every commit: a
// start's commit holds every container's task file, and writing them all
// in every sandbox was most of what a sandbox wrote before its story.
const WorkspaceSparseHeader = "Aimi-Workspace-Sparse"

// WorkspaceSkippedEntry is, in a sparse difference, the entry right after
// WorkspaceDeletedEntry: the paths its index marks skip-worktree, NUL
// separated. The runner writes none of them but its own task file, whose
// mark it clears; the entry itself is not written.
const WorkspaceSkippedEntry = ".aimi-skipped"

// WorkspaceSharedIndexHeader, sent with WorkspaceBaseHeader, names the
// shared index the image's workspace holds (the hex of
// .git/sharedindex.<hex>, git's split index: the image's commit's entries
// written once, in the image). The git service then sends the tip's index
// split against it (a few kilobytes: the entries the tip changed), when it
// makes the same shared index from the image's commit; otherwise, or
// without the header, the whole index.
const WorkspaceSharedIndexHeader = "Aimi-Workspace-Shared-Index"
