package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/daemon"
)

// egressEntry is one container's rules, as --json prints them.
type egressEntry struct {
	Name   string           `json:"name"`
	Status string           `json:"status"`
	Rules  *api.EgressRules `json:"rules"`
}

func newSwarmEgressCmd(s Streams) *cobra.Command {
	var asJSON bool
	cmd := daemonCmd(&cobra.Command{
		Use:   "egress [NAME]",
		Short: "the egress proxy's rules in force for the swarm's running containers: config, repository, origin and what a person granted (egress.ask)",
		Args:  cobra.MaximumNArgs(1),
	}, func(ctx context.Context, repo string, client *daemon.Client, args []string) error {
		view, err := client.Status(ctx, repo)
		if err != nil {
			return err
		}
		var out []egressEntry
		for _, c := range view.Containers {
			if len(args) == 1 && c.Name != args[0] {
				continue
			}
			out = append(out, egressEntry{Name: c.Name, Status: c.Status, Rules: c.Egress})
		}
		if len(args) == 1 && len(out) == 0 {
			return exitf(ExitInvalid, "no container %q in the swarm of %s; aimi swarm status lists them", oneLine(args[0], 60), repo)
		}
		if asJSON {
			if out == nil {
				out = []egressEntry{}
			}
			return json.NewEncoder(s.Out).Encode(out)
		}
		printEgress(s.Out, out)
		return nil
	})
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the rules as JSON")
	return cmd
}

// printEgress prints each container's rules by where they come from.
func printEgress(w io.Writer, entries []egressEntry) {
	if len(entries) == 0 {
		fmt.Fprintln(w, "No container in the swarm.")
		return
	}
	list := func(l []string) string {
		if len(l) == 0 {
			return "-"
		}
		for i, s := range l {
			l[i] = oneLine(s, 120)
		}
		return strings.Join(l, ", ")
	}
	for _, e := range entries {
		r := e.Rules
		if r == nil {
			fmt.Fprintf(w, "%s (%s): no rules in force (not running, or the sandboxes keep a network)\n", oneLine(e.Name, 60), dash(oneLine(e.Status, 20)))
			continue
		}
		ask := "refused at once"
		if r.Ask {
			ask = "asked in the inbox (egress.ask)"
		}
		fmt.Fprintf(w, "%s (%s)\n", oneLine(e.Name, 60), dash(oneLine(e.Status, 20)))
		fmt.Fprintf(w, "  config:      %s\n", list(r.Config))
		fmt.Fprintf(w, "  repository:  %s\n", list(r.Repository))
		if len(r.Origin) > 0 {
			fmt.Fprintf(w, "  origin:      %s\n", list(r.Origin))
		}
		if len(r.Granted) == 0 {
			fmt.Fprintln(w, "  granted:     -")
		}
		for _, g := range r.Granted {
			scope := oneLine(g.Scope, 20)
			if len(g.StoryIDs) > 0 {
				scope += " (story " + oneLine(strings.Join(g.StoryIDs, ","), 60) + ")"
			}
			by := oneLine(g.By, 20)
			if g.Who != "" {
				by += " (" + oneLine(g.Who, 60) + ")"
			}
			fmt.Fprintf(w, "  granted:     %s  %s  by a %s at %s\n", oneLine(g.Rule, 120), scope, by, g.At.Local().Format(time.DateTime))
		}
		fmt.Fprintf(w, "  otherwise:   %s\n", ask)
	}
}
