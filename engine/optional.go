package engine

import "context"

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

// Caps are the optional capabilities an engine has; a nil field is one it
// lacks.
type Caps struct {
	Events EventSource
}

// Capabilities reports which of the optional interfaces above eng
// implements.
func Capabilities(eng Engine) Caps {
	var c Caps
	if src, ok := eng.(EventSource); ok {
		c.Events = src
	}
	return c
}
