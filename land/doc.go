// Package land lands a swarm's branches: one after another onto an
// integration branch started at the landing target, each as one merge
// commit, made in the object database only (git merge-tree --write-tree,
// git commit-tree, git update-ref with the old value: no index, no
// worktree, no lock on anyone's checkout).
//
// A train is safe to run again after a crash at any point: a branch whose
// tip the integration branch already holds is landed and never merged
// twice, the integration branch only moves by compare-and-swap from the
// value the train read, and a merge commit made but not yet on the branch
// is made again from the same inputs (the same tree and parents).
//
// A branch that conflicts with what landed before it, or whose merged
// tree fails the verify check, goes to Fix when one is set (an agent's
// fix-up run) and is held otherwise: left out with its reason, and the
// train goes on with the next branch (a merge queue's rule: the target
// only ever holds work that merged and passed).
package land
