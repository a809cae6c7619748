package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/aimi-tools/swarm/acpmsg"
	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/daemon"
	"github.com/aimi-tools/swarm/state"
	"github.com/aimi-tools/swarm/usage"
)

// UsageTotals is what some model calls spent. Cost is at the configured
// prices (models.<provider>.prices); AgentCost is what ACP agents
// reported (usage_update) for stories whose calls the gateway did not see,
// counted in Cost too when its currency is USD, never twice.
type UsageTotals struct {
	Calls     int64              `json:"calls"`
	Tokens    usage.Usage        `json:"tokens"`
	Cost      float64            `json:"cost"`
	AgentCost map[string]float64 `json:"agentReportedCost,omitempty"`
}

func (t *UsageTotals) add(o UsageTotals) {
	t.Calls += o.Calls
	t.Tokens = t.Tokens.Add(o.Tokens)
	t.Cost += o.Cost
	for cur, a := range o.AgentCost {
		if t.AgentCost == nil {
			t.AgentCost = map[string]float64{}
		}
		t.AgentCost[cur] += a
	}
}

// StoryUsage is one story's part ("" for calls made while no single story
// was in progress).
type StoryUsage struct {
	Story string `json:"story"`
	UsageTotals
}

// ContainerUsage is one container's calls, per story.
type ContainerUsage struct {
	Name string `json:"name"`
	UsageTotals
	Stories []StoryUsage `json:"stories"`
}

// UsageReport is `aimi swarm usage --json`.
type UsageReport struct {
	Containers []ContainerUsage `json:"containers"`
	Total      UsageTotals      `json:"total"`
	// Attempts are the totals of each task file run several times (its
	// attempts are containers above).
	Attempts []AttemptsUsage `json:"attempts,omitempty"`
}

// usageFold reads one container's journal into its usage: the gateway's
// call records, each given to the one story in progress when the call
// began (by the time the container wrote the story's progress-updates,
// their cursor, since a container's lines reach the journal later than the
// gateway's records), and the cost the runner reported for a story from
// its agent.
type usageFold struct {
	open      map[string]time.Time
	intervals []storySpan
	calls     []timedCall
	agent     map[string]usage.AgentCost
}

type storySpan struct {
	story      string
	start, end time.Time
}

type timedCall struct {
	at   time.Time
	call usage.Call
}

func newUsageFold() *usageFold {
	return &usageFold{open: map[string]time.Time{}, agent: map[string]usage.AgentCost{}}
}

func (f *usageFold) add(r state.Record) {
	if r.Usage != nil && r.Stream == state.StreamDaemon {
		f.calls = append(f.calls, timedCall{r.Time, *r.Usage})
		return
	}
	if !r.Valid || r.Rejected != "" || r.Type != string(acpmsg.TypeProgressUpdate) {
		return
	}
	var m journalMessage
	if json.Unmarshal(r.Message, &m) != nil {
		return
	}
	at := r.Cursor.Time
	if at.IsZero() {
		at = r.Time
	}
	p := m.Payload
	switch p.Status {
	case acpmsg.StoryInProgress:
		// The engine stamps a line when it reads it, which under load is
		// after the agent's first call began; the runner wrote the
		// message (its own timestamp) before it started the agent.
		if written, err := time.Parse(time.RFC3339Nano, m.Timestamp); err == nil && written.Before(at) {
			at = written
		}
		if _, ok := f.open[p.StoryID]; !ok {
			f.open[p.StoryID] = at
		}
	case acpmsg.StoryCompleted, acpmsg.StoryFailed:
		if start, ok := f.open[p.StoryID]; ok {
			f.intervals = append(f.intervals, storySpan{p.StoryID, start, at})
			delete(f.open, p.StoryID)
		}
		if c, ok := usage.ParseAgentCost(p.Output); ok {
			prev := f.agent[p.StoryID]
			if prev.Currency == c.Currency {
				c.Amount += prev.Amount
			}
			f.agent[p.StoryID] = c
		}
	}
}

// storyAt is the one story in progress at t, or "".
func (f *usageFold) storyAt(t time.Time) string {
	found := ""
	for _, s := range f.intervals {
		if !t.Before(s.start) && !t.After(s.end) {
			if found != "" {
				return ""
			}
			found = s.story
		}
	}
	return found
}

// result is the container's usage: an agent-reported cost counts only for
// a story the gateway saw no call of.
func (f *usageFold) result(name string) ContainerUsage {
	for id, start := range f.open {
		f.intervals = append(f.intervals, storySpan{id, start, time.Unix(1<<40, 0)})
	}
	stories := map[string]*UsageTotals{}
	story := func(id string) *UsageTotals {
		if stories[id] == nil {
			stories[id] = &UsageTotals{}
		}
		return stories[id]
	}
	for _, c := range f.calls {
		t := story(f.storyAt(c.at))
		t.Calls++
		t.Tokens = t.Tokens.Add(c.call.Usage)
		t.Cost += c.call.Cost
	}
	for id, c := range f.agent {
		t := story(id)
		if t.Calls > 0 {
			continue
		}
		t.AgentCost = map[string]float64{c.Currency: c.Amount}
		if c.Currency == "USD" {
			t.Cost += c.Amount
		}
	}
	cu := ContainerUsage{Name: name, Stories: []StoryUsage{}}
	for _, id := range slices.Sorted(maps.Keys(stories)) {
		cu.Stories = append(cu.Stories, StoryUsage{Story: id, UsageTotals: *stories[id]})
		cu.add(*stories[id])
	}
	return cu
}

func newSwarmUsageCmd(s Streams) *cobra.Command {
	var t swarmTarget
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "usage [NAME]",
		Short: "model calls, tokens and cost per container and story, with totals",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return t.withClient(func(repo string, client *daemon.Client) error {
				view, err := client.Status(cmd.Context(), repo)
				if err != nil {
					return swarmErr(err)
				}
				rep := UsageReport{Containers: []ContainerUsage{}}
				for _, name := range usageNames(view, args) {
					f := newUsageFold()
					err := client.Logs(cmd.Context(), api.LogsRequest{RepoPath: repo, Name: name}, func(r state.Record) error {
						f.add(r)
						return nil
					})
					if err := endOfStream(cmd.Context(), err); err != nil {
						return err
					}
					cu := f.result(name)
					rep.Containers = append(rep.Containers, cu)
					rep.Total.add(cu.UsageTotals)
				}
				rep.Attempts = attemptsUsage(view, rep.Containers)
				if asJSON {
					enc := json.NewEncoder(s.Out)
					enc.SetIndent("", "  ")
					return enc.Encode(rep)
				}
				printUsage(s.Out, rep)
				return nil
			})
		},
	}
	t.addFlags(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the report as JSON")
	return cmd
}

func usageNames(v api.SwarmView, args []string) []string {
	if len(args) == 1 {
		return args
	}
	var names []string
	if v.State != nil {
		for _, c := range v.State.Containers {
			names = append(names, c.ContainerName)
		}
	}
	return names
}

func printUsage(w io.Writer, rep UsageReport) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "CONTAINER / STORY\tCALLS\tINPUT\tOUTPUT\tCACHE READ\tCACHE WRITE\tCOST\t")
	row := func(label string, t UsageTotals) {
		cost := fmt.Sprintf("%.4f", t.Cost)
		for cur, a := range t.AgentCost {
			if cur != "USD" {
				cost += fmt.Sprintf(" + %.4f %s", a, cur)
			}
		}
		if len(t.AgentCost) > 0 {
			cost += " (agent)"
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%s\t\n", label, t.Calls, t.Tokens.Input, t.Tokens.Output, t.Tokens.CacheRead, t.Tokens.CacheWrite, cost)
	}
	for _, c := range rep.Containers {
		row(oneLine(c.Name, 60), c.UsageTotals)
		for _, st := range c.Stories {
			label := "  " + oneLine(st.Story, 40)
			if st.Story == "" {
				label = "  (no single story)"
			}
			row(label, st.UsageTotals)
		}
	}
	for _, a := range rep.Attempts {
		row(fmt.Sprintf("%s (%d attempts)", oneLine(a.Branch, 50), len(a.Containers)), a.UsageTotals)
	}
	row("TOTAL", rep.Total)
	tw.Flush()
}
