package orchestrator

import (
	"cmp"
	"context"
	"maps"
	"slices"
	"strconv"
	"sync"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/attempts"
	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/state"
)

// Best of N (docs/attempts.md): a start with Attempts > 1 runs each task
// file that many times, each attempt a container of the swarm like any
// other (named <container>-aK, on branch <branch>--aK, its own journal
// and state entry), and picks one once all ended (attempts_pick.go).

// AgentVariant is one entry of agent.variants: what an attempt running
// it changes of the agent.
type AgentVariant struct {
	Name    string
	Command string            // replaces agent.command when set
	Env     map[string]string // added to the runner's environment
}

// attemptGroup is one task file run several times: its attempts' set as
// the state file records it, and the attempts' containers.
type attemptGroup struct {
	set  *state.AttemptSet // guarded by the swarm's mu
	ctrs []*ctr            // in attempt order
	// pickMu serialises the group's pick: attempts end together.
	pickMu sync.Mutex
}

// setAttempts takes a start request's attempts for the task files it
// plans.
func (sw *swarm) setAttempts(req api.StartRequest) {
	sw.attempts = max(req.Attempts, 1)
	sw.attemptsStop = cmp.Or(req.AttemptsStop, attempts.StopAll)
}

// expandAttempts turns each planned task file into its attempts when the
// swarm runs several (each with its variant), in task-file order.
func (sw *swarm) expandAttempts(planned []plannedTask) []plannedTask {
	if sw.attempts <= 1 {
		return planned
	}
	vs := sw.m.cfg.Variants
	out := make([]plannedTask, 0, len(planned)*sw.attempts)
	for _, p := range planned {
		for k := 1; k <= sw.attempts; k++ {
			a := p
			a.attempt = k
			if i := attempts.VariantIndex(k, len(vs)); i >= 0 {
				a.variant = vs[i].Name
			}
			out = append(out, a)
		}
	}
	return out
}

// baseName is the container name of a task file's attempt before a
// clash makes it unique.
func baseName(taskFile string, attempt int) string {
	n := containerName(taskFile)
	if attempt > 0 {
		n = attempts.Name(n, attempt)
	}
	return n
}

// attemptBranch is an attempt's branch (the task file's for attempt 0).
func attemptBranch(branch string, attempt int) string {
	if attempt > 0 {
		return attempts.Branch(branch, attempt)
	}
	return branch
}

// taskBranch is c's task file's branch: its own, or the one its
// attempt's branch was made from.
func taskBranch(c *ctr) string {
	if c.attempt > 0 {
		if b, _, ok := attempts.BaseBranch(c.branch); ok {
			return b
		}
	}
	return c.branch
}

// attemptEnv adds what an attempt's runner and agent are told: its number
// and variant, and the variant's command and environment.
func (sw *swarm) attemptEnv(c *ctr, env map[string]string) {
	if c.attempt == 0 {
		return
	}
	env[contract.EnvAttempt] = strconv.Itoa(c.attempt)
	env[contract.EnvVariant] = c.variant
	for _, v := range sw.m.cfg.Variants {
		if v.Name != c.variant || c.variant == "" {
			continue
		}
		maps.Copy(env, v.Env)
		if v.Command != "" {
			env[contract.EnvAgentCommand] = v.Command
		}
	}
}

// registerGroups makes the groups of the attempts just named (their
// containers' final names are known once created: saveAttempts writes
// them then).
func (sw *swarm) registerGroups(named []*ctr) {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	for _, c := range named {
		if c.attempt == 0 {
			continue
		}
		if sw.groups == nil {
			sw.groups = map[string]*attemptGroup{}
		}
		g := sw.groups[c.taskFile]
		if g == nil {
			g = &attemptGroup{set: &state.AttemptSet{TaskFilePath: c.taskFile, BranchName: taskBranch(c), Stop: sw.attemptsStop}}
			sw.groups[c.taskFile] = g
		}
		g.ctrs = append(g.ctrs, c)
	}
}

// groupOf is c's group, nil for a task file run once.
func (sw *swarm) groupOf(c *ctr) *attemptGroup {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	if c.attempt == 0 {
		return nil
	}
	return sw.groups[c.taskFile]
}

// setLocked brings g's set up to date with its containers' names (a
// name taken meanwhile changes during the create). Caller holds sw.mu.
func (g *attemptGroup) setLocked() *state.AttemptSet {
	for _, c := range g.ctrs {
		if a := g.set.Attempt(c.name); a != nil {
			continue
		}
		found := false
		for i := range g.set.Attempts {
			if g.set.Attempts[i].Attempt == c.attempt {
				g.set.Attempts[i].ContainerName, g.set.Attempts[i].BranchName = c.name, c.branch
				found = true
			}
		}
		if !found {
			g.set.Attempts = append(g.set.Attempts, state.Attempt{Attempt: c.attempt, ContainerName: c.name, BranchName: c.branch, Variant: c.variant})
		}
	}
	return g.set.Clone()
}

// saveAttempts writes every group's set into the state file's attempts
// section (one atomic write under the file's lock). A failure is logged:
// the next save, or the pick's, writes it again.
func (sw *swarm) saveAttempts(ctx context.Context) {
	sw.mu.Lock()
	var sets []*state.AttemptSet
	for _, g := range sw.groups {
		sets = append(sets, g.setLocked())
	}
	sw.mu.Unlock()
	if len(sets) == 0 {
		return
	}
	if err := sw.writeSets(ctx, sets...); err != nil {
		sw.m.log.Warn("record the attempts in the state file", "swarm", sw.id, "err", err)
	}
}

// writeSets puts sets into the state file's attempts section. A pick
// only goes forward: a set written from an older snapshot keeps the
// file's later pick.
func (sw *swarm) writeSets(ctx context.Context, sets ...*state.AttemptSet) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), stateWriteWait)
	defer cancel()
	return sw.store.Update(ctx, func(s *state.Swarm) error {
		for _, set := range sets {
			set = set.Clone()
			if cur := s.AttemptSet(set.TaskFilePath); cur != nil && cur.Pick != nil && (set.Pick == nil || cur.Pick.At.After(set.Pick.At)) {
				set.Pick = cur.Pick
			}
			s.PutAttemptSet(set)
		}
		return nil
	})
}

// restoreGroups rebuilds the groups of an adopted swarm from the state
// file's attempts section, before its containers are observed: linkGroups
// adds them after.
func (sw *swarm) restoreGroups(st *state.Swarm) {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	for _, set := range st.Attempts {
		if sw.groups == nil {
			sw.groups = map[string]*attemptGroup{}
		}
		sw.groups[set.TaskFilePath] = &attemptGroup{set: set.Clone()}
	}
}

// linkGroups gives each restored group its containers, and each of
// them its attempt and variant.
func (sw *swarm) linkGroups() {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	for _, g := range sw.groups {
		for _, a := range g.set.Attempts {
			for _, c := range sw.ctrs {
				if c.name == a.ContainerName && c.taskFile == g.set.TaskFilePath {
					c.attempt, c.variant = a.Attempt, a.Variant
					g.ctrs = append(g.ctrs, c)
				}
			}
		}
	}
}

// isAttempt reports whether the container name is an attempt of a task
// file run several times (restored groups count before linkGroups).
func (sw *swarm) isAttempt(name string) bool {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	for _, g := range sw.groups {
		if g.set.Attempt(name) != nil {
			return true
		}
	}
	return false
}

// attemptsView is the view's attempts: every group's set, in the order
// of their task files' first containers (then any whose containers all
// went with a cleanup).
func (sw *swarm) attemptsView() []*state.AttemptSet {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	var out []*state.AttemptSet
	seen := map[string]bool{}
	for _, c := range sw.ctrs {
		if g := sw.groups[c.taskFile]; g != nil && c.attempt > 0 && !seen[c.taskFile] {
			seen[c.taskFile] = true
			out = append(out, g.setLocked())
		}
	}
	for _, p := range slices.Sorted(maps.Keys(sw.groups)) {
		if !seen[p] {
			out = append(out, sw.groups[p].setLocked())
		}
	}
	return out
}
