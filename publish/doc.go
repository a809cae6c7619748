// Package publish moves a sandbox's finished branch to where the user sees
// it: into the user's own checkout as refs/heads/<branch> (never moving a
// branch that is checked out there, held by a rebase or bisect in any
// worktree, or has diverged: the container's tip is then named
// UnpublishedRef in the checkout, so git gc keeps it; docs/publish.md),
// and, when a hosted
// remote and a token are configured, to that remote with a pull request
// opened through the GitHub REST API (GitHub Enterprise through its API
// base). It runs the git CLI. A Publisher reads where a container's branch
// was received from a Source (the daemon gives it the git service of local
// mode); it knows nothing of containers.
package publish
