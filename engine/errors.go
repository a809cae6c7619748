package engine

import "errors"

// Errors callers match with errors.Is. Each returned error wraps one of these
// with what failed and what to do.
var (
	// ErrInvalidName: a container or network name does not match
	// ^aimi-[a-zA-Z0-9][a-zA-Z0-9_-]*$. Reported before any engine call.
	ErrInvalidName = errors.New("invalid name")
	// ErrInvalidSpec: some other field of a Spec is invalid. Reported before
	// any engine call.
	ErrInvalidSpec = errors.New("invalid container spec")
	// ErrConflict: a running container already has the requested name.
	ErrConflict = errors.New("a running container already has this name")
	// ErrImageNotFound: the image does not exist on the engine (there is no
	// registry to pull from).
	ErrImageNotFound = errors.New("image not found")
	// ErrRuntimeMissing: a required OCI runtime is not installed.
	ErrRuntimeMissing = errors.New("container runtime not installed")
	// ErrNetworkNotFound: the spec names a network that does not exist.
	ErrNetworkNotFound = errors.New("network not found")
	// ErrNotFound: no such container.
	ErrNotFound = errors.New("no such container")
	// ErrDiskLimitUnsupported: the engine's storage driver cannot limit a
	// container's writable layer (overlay2 can only on xfs mounted with
	// pquota; fuse-overlayfs and vfs cannot at all).
	ErrDiskLimitUnsupported = errors.New("the engine's storage driver cannot limit a container's writable layer")
	// ErrImageInUse: an image a container (running or not) was created
	// from cannot be removed; the engine keeps it until the container goes.
	ErrImageInUse = errors.New("the image is in use by a container")
	// ErrEngineUnavailable: no Docker engine answers.
	ErrEngineUnavailable = errors.New("docker engine unavailable")
	// ErrLeftOnNode: a sandbox was removed from its cluster, but a node kept
	// its container (the error names them); the sandbox is gone all the
	// same, and its name is free.
	ErrLeftOnNode = errors.New("removed, but a node kept its container")
	// ErrLineTooLong: a log line exceeded MaxLineBytes; it is reported (with
	// its cursor and size) and skipped.
	ErrLineTooLong = errors.New("line exceeds the 64 KiB limit")
)

// Error codes an engine reports in Exit.Failure when it, not the sandbox's
// own process, ended the sandbox. Users see them as the container's error
// code. A backend may add its own (swarmmode.CodeNodeLost).
const (
	// CodeStartFailed: the engine could not start the sandbox (no such
	// image on the node, the scheduler rejected it).
	CodeStartFailed = "CONTAINER_START_FAILED"
)
