package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/daemon"
	"github.com/aimi-tools/swarm/internal/termsafe"
	"github.com/aimi-tools/swarm/state"
)

// followMinGap bounds redraws: a container flooding progress-updates must
// not turn into a flood of status requests.
const followMinGap = 200 * time.Millisecond

// followSettle is how long following goes on once every container is
// terminal, waiting for the daemon to finish with them (process exit,
// branch published into the checkout, pull request opened), so that the
// branches are there when the command returns. A runner that hangs after
// its completion must not hold the command for its whole timeout.
const followSettle = time.Minute

// followSwarm shows the repo's swarm until every container is terminal:
// redrawn in place on a terminal, one line per change otherwise. Events from
// the daemon trigger a refresh; the refresh interval covers a lost event
// stream. Once every container is terminal it goes on for at most settle
// until the daemon is finished with them (see followSettle). It returns an
// exit code 1 error if any container failed or completed with failed
// stories.
func followSwarm(ctx context.Context, s Streams, client *daemon.Client, repo string, interval, settle time.Duration) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	changed := swarmChanges(ctx, client, repo)
	var r followRenderer
	if isTerminal(s.Out) {
		r = &ttyRenderer{w: s.Out, width: terminalWidth(s.Out)}
	} else {
		r = &lineRenderer{w: s.Out, last: map[string]string{}}
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	var lastDraw, allTerminal time.Time
	for {
		view, err := client.Status(ctx, repo)
		if err != nil {
			if errors.Is(err, context.Canceled) && ctx.Err() != nil {
				fmt.Fprintln(s.Err, "stopped following; the swarm goes on ('aimi swarm status')")
				return nil
			}
			return swarmErr(err)
		}
		lastDraw = time.Now()
		r.render(view)
		done := swarmDone(view)
		if done && allTerminal.IsZero() {
			allTerminal = time.Now()
		}
		busy := unsettled(view)
		if done && (len(busy) == 0 || time.Since(allTerminal) >= settle) {
			if len(busy) > 0 {
				fmt.Fprintf(s.Err, "the daemon is still finishing %s (process exit, publishing); see 'aimi swarm status'\n", strings.Join(busy, ", "))
			}
			printContainerErrors(s.Out, view)
			return followOutcome(view)
		}
		select {
		case <-ctx.Done():
			fmt.Fprintln(s.Err, "stopped following; the swarm goes on ('aimi swarm status')")
			return nil
		case <-changed:
		case <-tick.C:
		}
		if gap := time.Until(lastDraw.Add(followMinGap)); gap > 0 {
			select {
			case <-ctx.Done():
			case <-time.After(gap):
			}
		}
	}
}

// swarmChanges signals (coalesced) whenever the daemon publishes an event
// of the repo's swarms, until ctx ends. A failing event stream only ends the
// signals: callers also refresh on a timer.
func swarmChanges(ctx context.Context, client *daemon.Client, repo string) <-chan struct{} {
	changed := make(chan struct{}, 1)
	go func() {
		_ = client.Events(ctx, repo, func(api.Event) error {
			select {
			case changed <- struct{}{}:
			default:
			}
			return nil
		})
	}()
	return changed
}

// swarmDone reports whether every container is terminal.
func swarmDone(v api.SwarmView) bool {
	if v.State == nil || len(v.State.Containers) == 0 {
		return false
	}
	for _, c := range v.State.Containers {
		if !c.Status.Terminal() {
			return false
		}
	}
	return true
}

// followOutcome is how following a finished swarm ends: an exit code 1
// error when a container failed or completed with failed stories (the
// message spec's completed), nil otherwise. The attempts a task file's
// pick beat do not count: their task file has its result.
func followOutcome(v api.SwarmView) error {
	sum := state.Summarize(withoutLosers(v))
	if sum.Unsuccessful() == 0 {
		return nil
	}
	var what []string
	if sum.Failed > 0 {
		what = append(what, fmt.Sprintf("%d container(s) failed", sum.Failed))
	}
	if n := sum.CompletedWithFailures; n > 0 {
		what = append(what, fmt.Sprintf("%d completed with failed stories", n))
	}
	return &ExitError{Code: ExitInvalid, Err: fmt.Errorf("%s; see 'aimi swarm logs NAME', and rerun what failed with 'aimi swarm resume --retry-failed'",
		strings.Join(what, ", "))}
}

// unsettled names the containers the daemon is not finished with.
func unsettled(v api.SwarmView) []string {
	var busy []string
	for _, d := range v.Containers {
		if !d.Finished {
			busy = append(busy, d.Name)
		}
	}
	return busy
}

type followRenderer interface{ render(api.SwarmView) }

// followRow is one container's line.
type followRow struct {
	name, status, stories, last string
}

func followRows(v api.SwarmView) []followRow {
	if v.State == nil {
		return nil
	}
	lastOut := map[string]string{}
	for _, d := range v.Containers {
		lastOut[d.Name] = d.LastOutput
		if len(d.Errors) > 0 {
			e := d.Errors[len(d.Errors)-1]
			lastOut[d.Name] = strings.TrimSpace(e.Code + " " + e.Message)
		}
	}
	rows := make([]followRow, 0, len(v.State.Containers))
	for _, c := range v.State.Containers {
		p := c.StoryProgress
		st := fmt.Sprintf("%d/%d done", p.Completed, p.Total)
		if p.Failed > 0 {
			st += fmt.Sprintf(", %d failed", p.Failed)
		}
		if p.InProgress > 0 {
			st += fmt.Sprintf(", %d running", p.InProgress)
		}
		rows = append(rows, followRow{name: c.ContainerName, status: string(c.Status), stories: st, last: oneLine(lastOut[c.ContainerName], 60)})
	}
	return rows
}

// oneLine keeps the first line of s, made safe for a terminal (so that
// what is cut is what is shown), cut to n runes.
func oneLine(s string, n int) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	s = termsafe.String(s)
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// ttyRenderer redraws the whole table in place: cursor up over the previous
// drawing, clear to the end of the screen, draw.
type ttyRenderer struct {
	w     io.Writer
	width int // 0: unknown; lines are cut to it so none wraps (a wrapped line would break the cursor-up count)
	lines int
}

func (r *ttyRenderer) render(v api.SwarmView) {
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CONTAINER\tSTATUS\tSTORIES\tLAST OUTPUT")
	for _, row := range followRows(v) {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", row.name, row.status, row.stories, row.last)
	}
	tw.Flush()
	text := b.String()
	if r.width > 1 {
		lines := strings.SplitAfter(text, "\n")
		for i, l := range lines {
			if body := strings.TrimSuffix(l, "\n"); len([]rune(body)) >= r.width {
				lines[i] = string([]rune(body)[:r.width-1]) + "\n"
			}
		}
		text = strings.Join(lines, "")
	}
	if r.lines > 0 {
		writeControl(r.w, fmt.Sprintf("\x1b[%dA\x1b[J", r.lines))
	}
	io.WriteString(r.w, text)
	r.lines = strings.Count(text, "\n")
}

// lineRenderer prints one timestamped line per container whose row changed:
// readable in a log file or CI output, no control characters.
type lineRenderer struct {
	w    io.Writer
	last map[string]string
}

func (r *lineRenderer) render(v api.SwarmView) {
	now := time.Now().UTC().Format("15:04:05")
	for _, row := range followRows(v) {
		line := fmt.Sprintf("%s %s %s", row.name, row.status, row.stories)
		if row.last != "" {
			line += ": " + row.last
		}
		if r.last[row.name] == line {
			continue
		}
		r.last[row.name] = line
		fmt.Fprintf(r.w, "%s %s\n", now, line)
	}
}
