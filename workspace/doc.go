// Package workspace keeps, for the repositories a daemon's swarms ran on
// last, a workspace image each: the sandbox image plus one layer holding
// the repository's workspace (a shallow clone of its default branch,
// checked out, as the git service's ready-made workspace holds it) at
// contract.DefaultWorkspace. Every sandbox of the repository (the warm
// pool's and the created ones) is created from it, so its workspace is a
// copy-on-write view the storage driver gives: a sandbox writes only what
// it changes, in its own writable layer (where sandbox.disk counts it),
// and sees no other sandbox's writes. Its runner asks the git service
// only whether the tip moved, and fetches the difference when it did.
// docs/workspaces.md says why this mechanism and what was measured.
//
// Images are built once per (repository, base image, commit), in the
// background after a start (never beside one), bounded by MaxRepos; an
// image is removed only through the engine, which refuses while a
// container of it exists (engine.ErrImageInUse), so no sandbox loses its
// tree; the ones refused are removed by a later sweep. Every image and
// build container carries contract.LabelWorkspace and the daemon's
// labels: Cleanup, at the daemon's start, removes what a killed daemon
// left and adopts the images a previous daemon of the same labels kept
// (each names its repository, commit and sandbox image), when the sandbox
// image they were built on is still current. A start whose tip moved
// little from the image's commit (RebuildPaths, RebuildBytes) keeps the
// image and its pool sandboxes.
package workspace
