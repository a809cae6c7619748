package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/daemon"
)

// inboxPoll is how often `inbox --watch` asks again.
const inboxPoll = 2 * time.Second

func newSwarmInboxCmd(s Streams) *cobra.Command {
	var asJSON, watch, allRepos bool
	cmd := daemonCmd(&cobra.Command{
		Use:   "inbox",
		Short: "list the permission requests waiting for a person: the agents' (agent.permission_policy ask) and the egress proxy's (egress.ask)",
		Args:  cobra.NoArgs,
	}, func(ctx context.Context, repo string, client *daemon.Client, _ []string) error {
		if allRepos {
			repo = ""
		}
		var last []string
		for {
			in, err := client.Inbox(ctx, repo)
			if err != nil {
				return endOfStream(ctx, err)
			}
			ids := make([]string, len(in.Requests))
			for i, r := range in.Requests {
				// A request of the egress proxy changes as containers join it.
				ids[i] = fmt.Sprintf("%s/%d", r.ID, len(r.Containers))
			}
			if last == nil || !slices.Equal(ids, last) {
				if err := WriteInbox(s.Out, in, asJSON, time.Now()); err != nil {
					return err
				}
				last = ids
			}
			if !watch {
				return nil
			}
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(inboxPoll):
			}
		}
	})
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the requests as JSON (one document per change with --watch)")
	cmd.Flags().BoolVar(&watch, "watch", false, "print the inbox again whenever it changes, until interrupted")
	cmd.Flags().BoolVar(&allRepos, "all-repos", false, "requests of every repository, not just this one")
	return cmd
}

// printInbox prints the pending requests: one line each, then what the
// request names (paths, command) and the options to answer with.
func WriteInbox(w io.Writer, in api.Inbox, asJSON bool, now time.Time) error {
	if asJSON {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintln(w, string(b))
		return err
	}
	if len(in.Requests) == 0 {
		_, err := fmt.Fprintln(w, "No permission request waits.")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tCONTAINER\tSTORY\tKIND\tWAITING\tTITLE")
	for _, r := range in.Requests {
		who := oneLine(r.ContainerName, 60)
		if n := len(r.Containers); n > 1 {
			who = fmt.Sprintf("%d containers", n)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", oneLine(r.ID, 20), who, dash(oneLine(r.StoryID, 20)),
			oneLine(r.Kind, 20), now.Sub(r.AskedAt).Round(time.Second), oneLine(r.Title, 100))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, r := range in.Requests {
		opts := make([]string, len(r.Options))
		for i, o := range r.Options {
			opts[i] = fmt.Sprintf("%s (%s: %s)", oneLine(o.ID, 40), oneLine(o.Kind, 20), oneLine(o.Name, 40))
		}
		fmt.Fprintf(w, "%s: options %s; fallback at %s\n", oneLine(r.ID, 20), strings.Join(opts, ", "), r.Deadline.Local().Format("15:04:05"))
		if r.Command != "" {
			fmt.Fprintf(w, "  command: %s\n", oneLine(r.Command, 200))
		}
		if len(r.Containers) > 1 {
			names := make([]string, 0, len(r.Containers))
			for _, c := range r.Containers {
				names = append(names, oneLine(c, 60))
			}
			fmt.Fprintf(w, "  containers: %s\n", oneLine(strings.Join(names, ", "), 400))
		}
		for _, p := range r.Paths {
			fmt.Fprintf(w, "  path: %s\n", oneLine(p, 200))
		}
	}
	_, err := fmt.Fprintln(w, "Answer with: aimi swarm answer ID OPTION (an option id, allow or reject)")
	return err
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func newSwarmAnswerCmd(s Streams) *cobra.Command {
	var allFrom string
	var asJSON bool
	cmd := daemonCmd(&cobra.Command{
		Use:   "answer [ID] OPTION",
		Short: "answer a permission request: an option id, or allow / reject (--all-from NAME: every request of a container)",
		Args:  cobra.RangeArgs(1, 2),
	}, func(ctx context.Context, repo string, client *daemon.Client, args []string) error {
		req, err := AnswerRequest(repo, allFrom, args)
		if err != nil {
			return err
		}
		rep, err := client.Answer(ctx, req)
		if err != nil {
			return err
		}
		return WriteAnswer(s.Out, rep, asJSON)
	})
	cmd.Flags().StringVar(&allFrom, "all-from", "", "answer every pending request of this container")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print what was answered as JSON")
	return cmd
}

// AnswerRequest makes the daemon's request from `aimi swarm answer`'s
// arguments: ID OPTION, or with allFrom (a container) OPTION alone.
func AnswerRequest(repo, allFrom string, args []string) (api.AnswerRequest, error) {
	req := api.AnswerRequest{RepoPath: repo, AllFrom: allFrom}
	switch {
	case allFrom != "" && len(args) == 1:
		req.Option = args[0]
	case allFrom == "" && len(args) == 2:
		req.ID, req.Option = args[0], args[1]
	default:
		return req, exitf(ExitUsage, "give ID OPTION, or --all-from NAME OPTION")
	}
	return req, nil
}

// WriteAnswer prints what an answer answered, one line each or as JSON.
func WriteAnswer(w io.Writer, rep api.AnswerReport, asJSON bool) error {
	if asJSON {
		return json.NewEncoder(w).Encode(rep)
	}
	for _, a := range rep.Answered {
		fmt.Fprintf(w, "%s (%s): answered %s\n", oneLine(a.ID, 20), oneLine(a.ContainerName, 60), oneLine(a.OptionID, 40))
	}
	return nil
}
