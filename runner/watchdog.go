package runner

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aimi-tools/swarm/acpclient"
	"github.com/aimi-tools/swarm/acpmsg"
	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/tasks"
	"github.com/aimi-tools/swarm/usage"
)

// Watchdog defaults (agent.stall_timeout, agent.loop_limit).
const (
	DefaultStallTimeout = 15 * time.Minute
	DefaultLoopLimit    = 8
)

// watchdogTick bounds how often the watchdog looks: often enough that a
// short configured timeout (tests) fires close to its time, rarely enough
// to cost nothing against a 15-minute default.
func watchdogTick(stall time.Duration) time.Duration {
	return min(max(stall/10, 50*time.Millisecond), 5*time.Second)
}

// watchdog watches an agent's turn and sends one line of evidence when the
// turn is stalled (no ACP traffic either way and nothing running for
// stall) or looping (the same tool call with the same input loopLimit
// times in a row). A zero stall or loopLimit turns that check off.
func watchdog(ctx context.Context, c *acpclient.Client, stall time.Duration, loopLimit int) <-chan string {
	out := make(chan string, 1)
	if stall <= 0 && loopLimit <= 0 {
		return out
	}
	c.SetLoopLimit(loopLimit)
	tick := watchdogTick(stall)
	if stall <= 0 {
		tick = time.Second
	}
	go func() {
		t := time.NewTicker(tick)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if l, ok := c.Loop(); ok {
				out <- fmt.Sprintf("loop: %s (agent.loop_limit %d)", l, loopLimit)
				return
			}
			a := c.Activity()
			if quiet := time.Since(a.Last); stall > 0 && quiet >= stall && !a.Busy() {
				out <- fmt.Sprintf("stalled: no ACP traffic for %s (the last was %s at %s), no tool call or terminal running, %d tool calls in the turn (agent.stall_timeout %s)",
					quiet.Round(time.Second), lastWhat(a.LastWhat), a.Last.UTC().Format(time.TimeOnly), a.ToolCalls, stall)
				return
			}
		}
	}()
	return out
}

func lastWhat(s string) string {
	if s == "" {
		return "an answer or request"
	}
	return s
}

// stalledRetryNote is added to the prompt of a story's second attempt.
const stalledRetryNote = "\n\nNote: an earlier attempt at this story stalled and was cancelled (%s). Its changes, if any, are in the working tree: check them and finish the story."

// runWatched runs a story's agent turn; a turn the watchdog cancelled is
// reported (progress-update, so the journal has the evidence) and run
// once more. A second stall is left in the outcome for work to fail.
func (r *run) runWatched(ctx context.Context, be backend, s tasks.Story, prompt, dir string) outcome {
	o := be.runStory(ctx, s.ID, prompt, dir)
	if o.stalled == "" || ctx.Err() != nil {
		return o
	}
	r.log.Warn("story stalled: retrying it once", "story", s.ID, "evidence", o.stalled)
	r.emit(acpmsg.TypeProgressUpdate, &acpmsg.ProgressUpdate{StoryID: s.ID, Status: acpmsg.StoryInProgress,
		Output: acpmsg.TruncateOutput(fmt.Sprintf("%s: the agent's turn was cancelled, %s; retrying the story once.", s.ID, o.stalled))})
	o2 := be.runStory(ctx, s.ID, prompt+fmt.Sprintf(stalledRetryNote, oneLine(o.stalled, 300)), dir)
	o2.cost = addCost(o.cost, o2.cost)
	return o2
}

// addCost sums the costs of a story's attempts (each its own session);
// costs in two currencies keep the later one.
func addCost(a, b *usage.AgentCost) *usage.AgentCost {
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	case a.Currency != b.Currency:
		return b
	}
	return &usage.AgentCost{Amount: a.Amount + b.Amount, Currency: a.Currency}
}

// watchdogFromEnv reads agent.stall_timeout and agent.loop_limit as the
// daemon passes them.
func (c *Config) watchdogFromEnv(getenv func(string) string) error {
	if s := strings.TrimSpace(getenv(contract.EnvStallTimeout)); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			return fmt.Errorf("%s=%q: want a positive duration like 15m", contract.EnvStallTimeout, s)
		}
		c.StallTimeout = d
	}
	if s := strings.TrimSpace(getenv(contract.EnvLoopLimit)); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			return fmt.Errorf("%s=%q: want a whole number (0 turns the loop check off)", contract.EnvLoopLimit, s)
		}
		c.LoopLimit = n
	}
	return nil
}

// withCost puts the agent-reported cost ahead of a story's output, whose
// text (the agent's, its commands') has the cost sentence defanged: the
// first such sentence in the journal is the runner's.
func withCost(output string, c *usage.AgentCost) string {
	output = usage.DefangAgentCost(output)
	if c == nil || output == "" {
		return output
	}
	return usage.FormatAgentCost(*c) + " " + output
}
