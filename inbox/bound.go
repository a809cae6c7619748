package inbox

import (
	"context"
	"fmt"
	"time"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/contract"
)

// Bounds of what one container's requests write to its journal and to the
// daemon's log: requests, answers and fallbacks, line by line up to
// linesPerWindow in a window, then counted and told in one line when the
// window ends. A person answers a few requests a minute; an agent whose
// requests time out fast (a short agent.ask_timeout) would otherwise write
// two lines per request for as long as it runs.
const (
	linesWindow    = time.Minute
	linesPerWindow = 16
)

// lineBudget is one container's use of its window.
type lineBudget struct {
	start time.Time
	used  int
	held  int // lines not written in this window
}

// note journals and logs a line about request r unless r's container
// used its window's lines; then it is counted (see flushLines).
func (in *Inbox) note(ctx context.Context, r api.PermissionRequest, text string, log func()) {
	sb := contract.Sandbox{Swarm: r.SwarmID, Container: r.ContainerName}
	now := in.cfg.Now()
	in.mu.Lock()
	b := in.lines[sb]
	var ended *lineBudget
	if b != nil && now.Sub(b.start) >= linesWindow {
		ended, b = b, nil
	}
	if b == nil {
		b = &lineBudget{start: now}
		in.lines[sb] = b
	}
	b.used++
	if b.used > linesPerWindow {
		b.held++
	}
	write := b.used <= linesPerWindow
	in.mu.Unlock()
	in.tellHeld(ctx, sb, ended)
	if write {
		log()
		in.journal(ctx, r, text)
	}
}

// flushLines tells the lines held in windows that ended (all of them when
// all is set) and forgets those windows.
func (in *Inbox) flushLines(ctx context.Context, all bool) {
	now := in.cfg.Now()
	var ended []*lineBudget
	var whose []contract.Sandbox
	in.mu.Lock()
	for sb, b := range in.lines {
		if all || now.Sub(b.start) >= linesWindow {
			delete(in.lines, sb)
			ended, whose = append(ended, b), append(whose, sb)
		}
	}
	in.mu.Unlock()
	for i, b := range ended {
		in.tellHeld(ctx, whose[i], b)
	}
}

// tellHeld writes the one line about what window b held back.
func (in *Inbox) tellHeld(ctx context.Context, sb contract.Sandbox, b *lineBudget) {
	if b == nil || b.held == 0 {
		return
	}
	in.log.Warn("permission request lines held back", "swarm", sb.Swarm, "container", sb.Container, "count", b.held, "window", linesWindow)
	in.journal(ctx, api.PermissionRequest{SwarmID: sb.Swarm, ContainerName: sb.Container},
		fmt.Sprintf("%d more permission request events (requests, answers, fallbacks) in %v not journaled one by one (at most %d a window); 'aimi swarm inbox' lists what waits",
			b.held, linesWindow, linesPerWindow))
}
