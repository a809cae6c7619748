package budget

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"regexp"
	"strconv"
	"sync"
	"time"

	"github.com/aimi-tools/swarm/acpmsg"
	"github.com/aimi-tools/swarm/contract"
)

// maxPoints bounds the calls kept with their time per container (for the
// story budget); older ones still count for the swarm.
const maxPoints = 1 << 18

// Limits are a swarm's budgets in the prices' currency; 0 is none.
type Limits struct {
	Swarm float64 // swarm.budget: all containers of the swarm together
	Story float64 // agent.story_budget: one story of one container
	// Grace is how far past a budget, as a fraction of it, a container's
	// model calls still go through (swarm.budget_grace); past it the
	// gateway refuses them (Refusal).
	Grace float64
}

// Spend is one model call's cost, as a journal read back holds it.
type Spend struct {
	Container string
	At        time.Time
	Cost      float64
}

// Config is what a Keeper needs from the daemon.
type Config struct {
	// Limits are the budgets for the swarm of a repository, read at
	// every question (the repository's configuration layers).
	Limits func(repoPath string) Limits
	// Seed reads back the calls a swarm's journals hold from before
	// the daemon started (nil: none).
	Seed   func(ctx context.Context, repoPath, swarmID string, before time.Time) ([]Spend, error)
	Logger *slog.Logger
}

// Keeper counts spend per swarm and container and answers the runners.
type Keeper struct {
	cfg    Config
	start  time.Time
	seedMu sync.Mutex // one seed at a time: a swarm is read back once

	mu     sync.Mutex
	swarms map[string]*swarmSpend
}

type swarmSpend struct {
	seeded bool
	repo   string // the repository, as its runners' questions name it
	total  float64
	calls  map[string][]point // container -> calls, oldest first
	// open is when the oldest story in flight of each container began,
	// as its last question said (its story budget's hard cap counts from
	// there).
	open map[string]time.Time
}

type point struct {
	at   time.Time
	cost float64
}

// New makes a Keeper; calls added from now on are this daemon's own.
func New(cfg Config) *Keeper {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Keeper{cfg: cfg, start: time.Now(), swarms: map[string]*swarmSpend{}}
}

// Add counts one call of a container that began at at. A call that began
// before the Keeper is left to the journal read back (Config.Seed), so
// that none counts twice.
func (k *Keeper) Add(sb contract.Sandbox, at time.Time, cost float64) {
	if !(cost > 0) || at.Before(k.start) {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.addLocked(k.swarm(sb.Swarm), sb.Container, at, cost)
}

func (k *Keeper) swarm(id string) *swarmSpend {
	s := k.swarms[id]
	if s == nil {
		s = &swarmSpend{calls: map[string][]point{}, open: map[string]time.Time{}}
		k.swarms[id] = s
	}
	return s
}

func (k *Keeper) addLocked(s *swarmSpend, container string, at time.Time, cost float64) {
	s.total += cost
	pts := append(s.calls[container], point{at, cost})
	if len(pts) > maxPoints {
		pts = append([]point(nil), pts[len(pts)/2:]...)
	}
	s.calls[container] = pts
}

// seed reads the swarm's earlier calls back once per daemon.
func (k *Keeper) seed(ctx context.Context, repoPath, swarmID string) {
	if k.cfg.Seed == nil {
		return
	}
	k.seedMu.Lock()
	defer k.seedMu.Unlock()
	k.mu.Lock()
	done := k.swarm(swarmID).seeded
	k.mu.Unlock()
	if done {
		return
	}
	spent, err := k.cfg.Seed(ctx, repoPath, swarmID, k.start)
	if err != nil {
		// Counted as far as read: reading again would count it twice.
		k.cfg.Logger.Warn("budget: the calls of the swarm's journals before this daemon could not all be read", "swarm", swarmID, "err", err)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	s := k.swarm(swarmID)
	for _, c := range spent {
		if c.At.Before(k.start) && c.Cost > 0 {
			k.addLocked(s, c.Container, c.At, c.Cost)
		}
	}
	s.seeded = true
}

// Spent is what a swarm spent so far (as far as this daemon knows).
func (k *Keeper) Spent(swarmID string) float64 {
	k.mu.Lock()
	defer k.mu.Unlock()
	if s := k.swarms[swarmID]; s != nil {
		return s.total
	}
	return 0
}

// storyIDRE is what a story id may be in an answer (it comes from the
// container).
var storyIDRE = regexp.MustCompile(acpmsg.PatternStoryID)

// Check answers one container's question at a story boundary, and notes
// its stories in flight for Refusal.
func (k *Keeper) Check(ctx context.Context, repoPath string, sb contract.Sandbox, req contract.BudgetRequest) contract.BudgetAnswer {
	now := time.Now()
	ans := k.decide(ctx, repoPath, sb, req)
	k.noteOpen(repoPath, sb, req.Running, now, ans.State == contract.BudgetGo)
	return ans
}

// noteOpen keeps when sb's oldest story in flight began: of running, and
// now for the story a go lets begin.
func (k *Keeper) noteOpen(repoPath string, sb contract.Sandbox, running []contract.BudgetStory, now time.Time, begins bool) {
	var oldest time.Time
	if begins {
		oldest = now
	}
	for _, st := range running {
		start, err := time.Parse(time.RFC3339Nano, st.Start)
		if err == nil && storyIDRE.MatchString(st.ID) && (oldest.IsZero() || start.Before(oldest)) {
			oldest = start
		}
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	s := k.swarm(sb.Swarm)
	s.repo = repoPath
	if oldest.IsZero() {
		delete(s.open, sb.Container)
		return
	}
	s.open[sb.Container] = oldest
}

// Refusal says why the model gateway must refuse a call of sb ("" when
// it may pass): its swarm's spend is past swarm.budget, or its story's
// past agent.story_budget, by more than the grace. Until the container
// asked its first question since the daemon started, nothing is refused
// (the repository and its stories are not known yet).
func (k *Keeper) Refusal(sb contract.Sandbox) string {
	k.mu.Lock()
	s := k.swarms[sb.Swarm]
	repo := ""
	if s != nil {
		repo = s.repo
	}
	k.mu.Unlock()
	if repo == "" {
		return ""
	}
	lim := k.cfg.Limits(repo)
	k.mu.Lock()
	defer k.mu.Unlock()
	if limit := lim.Swarm * (1 + lim.Grace); lim.Swarm > 0 && s.total > limit {
		return fmt.Sprintf("%s: the swarm spent %s, past its budget %s and its grace (swarm.budget, swarm.budget_grace %s%%): its model calls are refused. Raise swarm.budget and run 'aimi swarm resume' to go on.",
			acpmsg.CodeBudgetExceeded, money(s.total), money(lim.Swarm), percent(lim.Grace))
	}
	start, ok := s.open[sb.Container]
	if lim.Story <= 0 || !ok {
		return ""
	}
	spent := 0.0
	for _, p := range s.calls[sb.Container] {
		if !p.at.Before(start) {
			spent += p.cost
		}
	}
	if limit := lim.Story * (1 + lim.Grace); spent > limit {
		return fmt.Sprintf("%s: the story in flight spent %s, past its budget %s and its grace (agent.story_budget, swarm.budget_grace %s%%): its model calls are refused. Raise agent.story_budget and run 'aimi swarm resume' to go on.",
			acpmsg.CodeBudgetExceeded, money(spent), money(lim.Story), percent(lim.Grace))
	}
	return ""
}

func percent(f float64) string { return strconv.FormatFloat(f*100, 'f', -1, 64) }

// decide is Check's answer.
func (k *Keeper) decide(ctx context.Context, repoPath string, sb contract.Sandbox, req contract.BudgetRequest) contract.BudgetAnswer {
	swarmID, container := sb.Swarm, sb.Container
	lim := k.cfg.Limits(repoPath)
	if lim.Swarm <= 0 && lim.Story <= 0 {
		return contract.BudgetAnswer{State: contract.BudgetGo}
	}
	k.seed(ctx, repoPath, swarmID)
	k.mu.Lock()
	defer k.mu.Unlock()
	s := k.swarm(swarmID)
	if lim.Swarm > 0 && s.total >= lim.Swarm {
		msg := fmt.Sprintf("%s: the swarm spent %s of its budget %s (swarm.budget; model calls through the gateway at models.<provider>.prices); no further story was begun. Raise swarm.budget and run 'aimi swarm resume' to go on.",
			acpmsg.CodeBudgetExceeded, money(s.total), money(lim.Swarm))
		k.cfg.Logger.Warn("budget reached: the container begins no further story", "swarm", swarmID, "container", container, "spent", s.total, "budget", lim.Swarm, "key", "swarm.budget")
		return contract.BudgetAnswer{State: contract.BudgetStop, Message: msg}
	}
	if lim.Story <= 0 {
		return contract.BudgetAnswer{State: contract.BudgetGo}
	}
	for _, st := range req.Stories {
		start, err1 := time.Parse(time.RFC3339Nano, st.Start)
		end, err2 := time.Parse(time.RFC3339Nano, st.End)
		if err1 != nil || err2 != nil || !storyIDRE.MatchString(st.ID) {
			continue
		}
		spent := 0.0
		for _, p := range s.calls[container] {
			if !p.at.Before(start) && !p.at.After(end) {
				spent += p.cost
			}
		}
		if spent >= lim.Story {
			msg := fmt.Sprintf("%s: %s spent %s of its budget %s (agent.story_budget; model calls through the gateway at models.<provider>.prices); it ended and its work is kept, no further story was begun. See 'aimi swarm usage', raise agent.story_budget if stories like it need more, and run 'aimi swarm resume' to go on.",
				acpmsg.CodeBudgetExceeded, st.ID, money(spent), money(lim.Story))
			k.cfg.Logger.Warn("story budget reached: the container begins no further story", "swarm", swarmID, "container", container, "story", st.ID, "spent", spent, "budget", lim.Story, "key", "agent.story_budget")
			return contract.BudgetAnswer{State: contract.BudgetStop, Message: msg}
		}
	}
	return contract.BudgetAnswer{State: contract.BudgetGo}
}

func money(v float64) string { return fmt.Sprintf("%.4f", v) }

// ServeBudget implements contract.Budgets.
func (k *Keeper) ServeBudget(w http.ResponseWriter, r *http.Request, from contract.Caller) {
	var req contract.BudgetRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, contract.BudgetMaxBody)).Decode(&req); err != nil || len(req.Stories) > contract.BudgetMaxStories {
		http.Error(w, "aimi: budget question refused: not a budget request", http.StatusBadRequest)
		return
	}
	ans := k.Check(r.Context(), from.RepoPath, contract.Sandbox{Swarm: from.SwarmID, Container: from.Container}, req)
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(ans)
}
