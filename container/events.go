package container

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/aimi-tools/swarm/engine"
	"github.com/aimi-tools/swarm/internal/enginelog"
	"github.com/docker/docker/api/types/events"
)

// Events subscribes to die and oom events of containers carrying all the
// given labels. The subscription starts at the call: events between the call
// and the engine accepting the request are replayed (Since=now), so an oom
// right after Start is not missed. The error channel receives at most one
// error (ctx.Err() when ctx ends); then both channels are closed. OOM events
// matter where the engine does not set OOMKilled (cgroups v2).
func (d *Docker) Events(ctx context.Context, labels map[string]string) (<-chan engine.Event, <-chan error) {
	f := labelFilters(labels)
	f.Add("type", string(events.ContainerEventType))
	f.Add("event", string(events.ActionDie))
	f.Add("event", string(events.ActionOOM))
	now := time.Now()
	msgs, errs := d.cli.Events(ctx, events.ListOptions{
		Filters: f,
		Since:   enginelog.SinceParam(now),
	})
	out := make(chan engine.Event, 64)
	errc := make(chan error, 1)
	go func() {
		defer close(errc)
		defer close(out)
		for {
			select {
			case m := <-msgs:
				select {
				case out <- toEvent(m):
				case <-ctx.Done():
					errc <- ctx.Err()
					return
				}
			case err := <-errs:
				if ctx.Err() != nil {
					err = ctx.Err()
				} else {
					err = fmt.Errorf("container events: %w (subscribe again; reconcile with List meanwhile)", err)
				}
				errc <- err
				return
			}
		}
	}()
	return out, errc
}

// engineAttr reports the event attributes the engine adds next to the
// container's labels.
func engineAttr(k string) bool {
	switch k {
	case "image", "name", "exitCode", "signal", "execDuration":
		return true
	}
	return false
}

func toEvent(m events.Message) engine.Event {
	ev := engine.Event{
		ContainerID: m.Actor.ID,
		Name:        m.Actor.Attributes["name"],
		Action:      string(m.Action),
		Time:        time.Unix(0, m.TimeNano).UTC(),
		Labels:      map[string]string{},
	}
	if code, err := strconv.Atoi(m.Actor.Attributes["exitCode"]); err == nil {
		ev.ExitCode = code
	}
	for k, v := range m.Actor.Attributes {
		if !engineAttr(k) {
			ev.Labels[k] = v
		}
	}
	return ev
}
