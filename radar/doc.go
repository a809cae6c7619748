// Package radar foresees how a swarm's branches will merge while their
// agents still work: each pair of branch tips, and each tip against the
// landing target, is merged in the object database only (git merge-tree
// --write-tree, no index, no worktree, no lock on anyone's checkout).
//
// A pair ends as a conflict (the merge would stop: which files), an
// overlap (both sides changed the same files, and git merges them
// cleanly) or nothing. A Radar remembers the last outcome of every pair
// and merges again only the pairs one of whose tips moved, so a push
// costs the merges of its own branch, not the swarm's.
//
// The merges' trees are written to a scratch object directory beside the
// repository (git reads the repository's objects through alternates), so
// the repository a radar looks at gains no objects and its size limits
// are untouched.
package radar
