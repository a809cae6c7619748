package engine

import (
	"context"
	"io"
	"time"
)

// The optional capabilities of an engine, all in one place. A caller that
// can use one asks for it with Capabilities, never with a type assertion
// of its own, so what an engine offers is read here.

// EventSource reports die and oom events (*container.Docker has it). Under
// cgroups v2 the engine does not always set OOMKilled, so an oom event for
// a container counts as OOM too (docs/design.md decision 1).
type EventSource interface {
	// Events subscribes to die and oom events of containers carrying all
	// the given labels. The error channel receives at most one error
	// (ctx.Err() when ctx ends); then both channels are closed.
	Events(ctx context.Context, labels map[string]string) (<-chan Event, <-chan error)
}

// Handover gives a running sandbox, created before its task was known,
// what a create would have given it (the warm pool, package warmpool;
// *container.Docker has it). A Swarm mode service cannot be re-pointed at
// a new task, so that engine has none (docs/warm-pool.md).
type Handover interface {
	// Rename gives sandbox id another name; a name another sandbox holds
	// is ErrConflict, as for Create.
	Rename(ctx context.Context, id, name string) error
	// JoinNetwork moves a sandbox created on NetworkNone to network, as
	// if it had been created there (it leaves every other network).
	JoinNetwork(ctx context.Context, id, network string) error
	// LeaveNetworks disconnects sandbox id from every network but keep.
	LeaveNetworks(ctx context.Context, id, keep string) error
	// ImageID is the id of the image ref names now ("" when none): a
	// sandbox of an older build of the same tag is outdated.
	ImageID(ctx context.Context, ref string) (string, error)
	// WriteStdinLines writes lines to sandbox id's stdin in order through
	// one attach (each line as WriteStdin takes one): lines written
	// through attaches of their own may reach it interleaved or out of
	// order, since the engine copies each attach's input on its own.
	WriteStdinLines(ctx context.Context, id string, lines [][]byte) error
}

// Images makes images of its own from a sandbox image plus a tree
// (package workspace; *container.Docker has it), and removes them. The
// engine refuses to remove an image a container uses (ErrImageInUse): that
// refusal is what keeps a workspace image while any sandbox of it lives.
type Images interface {
	// BuildImage makes b.Ref: b.Base plus b.Tree (a tar) unpacked at
	// b.Dir, owned by the base image's user, with b.Labels and b.Env
	// added to the image's configuration. It returns the image's id.
	BuildImage(ctx context.Context, b ImageBuild) (string, error)
	// ListImages reports every image carrying all the given labels.
	ListImages(ctx context.Context, labels map[string]string) ([]Image, error)
	// RemoveImage removes image id (by id: every tag goes with it); nil
	// when it is gone, ErrImageInUse while a container uses it.
	RemoveImage(ctx context.Context, id string) error
	// ImageID is the id of the image ref names now ("" when none).
	ImageID(ctx context.Context, ref string) (string, error)
}

// ImageBuild is what Images.BuildImage makes.
type ImageBuild struct {
	Base, Ref, Dir string
	Tree           io.Reader
	Labels         map[string]string // on the image (and so on every container of it) and its build container
	BuildName      string            // the build container's name
	Env            []string
}

// Image is one image of Images.ListImages.
type Image struct {
	ID      string
	Tags    []string
	Labels  map[string]string
	Created time.Time
}

// Caps are the optional capabilities an engine has; a nil field is one it
// lacks.
type Caps struct {
	Events   EventSource
	Handover Handover
	Images   Images
}

// Capabilities reports which of the optional interfaces above eng
// implements.
func Capabilities(eng Engine) Caps {
	var c Caps
	if src, ok := eng.(EventSource); ok {
		c.Events = src
	}
	if h, ok := eng.(Handover); ok {
		c.Handover = h
	}
	if im, ok := eng.(Images); ok {
		c.Images = im
	}
	return c
}
