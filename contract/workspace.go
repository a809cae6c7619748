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
