package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/daemon"
	"github.com/aimi-tools/swarm/state"
)

// renderSwarmView prints the status table (the state issue's RenderStatus)
// and then the errors the state file has no field for.
func renderSwarmView(w io.Writer, v api.SwarmView) {
	if v.State != nil {
		RenderStatus(w, v.State)
	}
	printContainerNodes(w, v)
	printEgressDenied(w, v)
	printGitRefused(w, v)
	printLimitWaits(w, v)
	printConflicts(w, v)
	printLandLine(w, v.Land)
	printAttempts(w, v)
	printContainerErrors(w, v)
}

// printContainerNodes says which cluster node each container runs on, when
// the engine is a cluster (the state file has no field for it).
func printContainerNodes(w io.Writer, v api.SwarmView) {
	width := 0
	for _, c := range v.Containers {
		if c.Node != "" {
			width = max(width, len(c.Name))
		}
	}
	if width == 0 {
		return
	}
	fmt.Fprintln(w, "Nodes:")
	for _, c := range v.Containers {
		if c.Node != "" {
			fmt.Fprintf(w, "  %-*s  %s\n", width, c.Name, c.Node)
		}
	}
}

// newSwarmDaemonStatusCmd is `aimi swarm status`: the state issue's command
// (newSwarmStatusCmd, status.go), wrapped to ask the daemon first for its
// reconciled view. When no daemon answers, it says so on stderr and runs the
// wrapped command, which reads the state file alone. The wrapped command's
// --repo and --json are reused; --socket, --watch and --interval are added.
// With --json the daemon's answer is its reconciled copy of the file's
// content, in the file's exact shape.
func newSwarmDaemonStatusCmd(s Streams) *cobra.Command {
	cmd := newSwarmStatusCmd(s)
	fileRun := cmd.RunE
	fl := cmd.Flags()
	var t swarmTarget
	var watch, detail bool
	var interval time.Duration
	fl.StringVar(&t.socket, "socket", "", "daemon socket (default $AIMI_SOCKET, $XDG_RUNTIME_DIR/aimi/aimid.sock or /run/aimi/aimid.sock)")
	fl.BoolVar(&watch, "watch", false, "redraw on every change until interrupted (needs the daemon)")
	fl.BoolVar(&detail, "detail", false, "with --json: the daemon's whole view, the state file's content plus what it has no field for (errors, nodes, model calls waiting at the gateway)")
	fl.DurationVar(&interval, "interval", 2*time.Second, "with --watch: the longest time between two redraws")
	cmd.Short = "show the swarm's state (from the daemon, else from the state file)"
	cmd.RunE = func(c *cobra.Command, args []string) error {
		if interval <= 0 {
			return exitf(ExitUsage, "--interval %v: use a positive duration", interval)
		}
		t.repo, _ = fl.GetString("repo")
		asJSON, _ := fl.GetBool("json")
		if detail && !asJSON {
			return exitf(ExitUsage, "--detail goes with --json (the table shows the detail anyway)")
		}
		repo, client, err := t.resolve()
		if err != nil {
			return err
		}
		defer client.Close()
		ctx := c.Context()
		format := statusFormat{json: asJSON, detail: detail}
		if asJSON && !watch {
			body, err := client.StatusJSON(ctx, repo)
			if errors.Is(err, daemon.ErrUnreachable) {
				return fileFallback(c, s, fileRun, args)
			}
			if err != nil {
				return swarmErr(err)
			}
			return printStatusJSON(s.Out, body, detail)
		}
		view, err := client.Status(ctx, repo)
		if errors.Is(err, daemon.ErrUnreachable) && !watch {
			return fileFallback(c, s, fileRun, args)
		}
		if err != nil {
			return swarmErr(err)
		}
		if !watch {
			return printStatus(s.Out, view, format)
		}
		return watchStatus(ctx, s, client, repo, view, format, interval)
	}
	return cmd
}

// fileFallback is status without a daemon: the state file alone.
func fileFallback(c *cobra.Command, s Streams, fileRun func(*cobra.Command, []string) error, args []string) error {
	fmt.Fprintln(s.Err, "daemon not running; showing the state file")
	return fileRun(c, args)
}

// statusFormat is how status prints: the table, the state file's JSON,
// or (detail) the daemon's whole view as JSON.
type statusFormat struct{ json, detail bool }

func printStatus(w io.Writer, v api.SwarmView, f statusFormat) error {
	if !f.json {
		renderSwarmView(w, v)
		return nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return exitf(ExitUsage, "encode state: %v", err)
	}
	return printStatusJSON(w, b, f.detail)
}

// printStatusJSON prints the daemon's answer (an api.SwarmView as JSON),
// indented: its state, or with detail all of it. The bytes are the
// daemon's, re-indented, not decoded and encoded again: for hundreds of
// containers the decoding was most of the command's time, and the daemon
// encodes the state strictly (state.Swarm.MarshalJSON), so a round trip
// would print the same.
func printStatusJSON(w io.Writer, body []byte, detail bool) error {
	doc := bytes.TrimSpace(body)
	if !detail {
		var v struct {
			State     json.RawMessage `json:"state"`
			Conflicts json.RawMessage `json:"conflicts"`
			Land      json.RawMessage `json:"land"`
		}
		if err := json.Unmarshal(doc, &v); err != nil {
			return swarmErr(fmt.Errorf("decode answer of GET /v1/swarms/status: %w", err))
		}
		doc = v.State
		if doc == nil {
			doc = []byte("null")
		}
		doc = withMembers(bytes.TrimSpace(doc), member{"conflicts", v.Conflicts}, member{"land", v.Land})
	}
	var out bytes.Buffer
	out.Grow(len(doc) * 2)
	if err := json.Indent(&out, doc, "", "  "); err != nil {
		return swarmErr(fmt.Errorf("decode answer of GET /v1/swarms/status: %w", err))
	}
	out.WriteByte('\n')
	if _, err := out.WriteTo(w); err != nil {
		return exitf(ExitUsage, "write: %v", err)
	}
	return nil
}

// watchStatus redraws on every event (at most every followMinGap: a
// change after a quiet spell is drawn at once) and at least every
// interval, until ctx ends.
func watchStatus(ctx context.Context, s Streams, client *daemon.Client, repo string, view api.SwarmView, f statusFormat, interval time.Duration) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	changed := swarmChanges(ctx, client, repo)
	tty := isTerminal(s.Out) && !f.json
	tick := time.NewTicker(interval)
	defer tick.Stop()
	var lastDraw time.Time
	for {
		lastDraw = time.Now()
		if tty {
			writeControl(s.Out, "\x1b[H\x1b[2J") // home, clear screen
		}
		if !f.json { // JSON output stays a sequence of documents
			fmt.Fprintf(s.Out, "%s\n", time.Now().UTC().Format(time.RFC3339))
		}
		if err := printStatus(s.Out, view, f); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
		case <-tick.C:
		}
		if gap := time.Until(lastDraw.Add(followMinGap)); gap > 0 {
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(gap):
			}
		}
		var err error
		if view, err = client.Status(ctx, repo); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return swarmErr(err)
		}
	}
}

// daemonCmd makes cmd a command that asks the daemon about one repository:
// it gets the --repo and --socket flags, and its run gets the resolved
// repository and a client that is closed after it.
func daemonCmd(cmd *cobra.Command, run func(ctx context.Context, repo string, client *daemon.Client, args []string) error) *cobra.Command {
	var t swarmTarget
	cmd.RunE = func(c *cobra.Command, args []string) error {
		return t.withClient(func(repo string, client *daemon.Client) error {
			return run(c.Context(), repo, client, args)
		})
	}
	t.addFlags(cmd)
	return cmd
}

func newSwarmStopCmd(s Streams) *cobra.Command {
	return daemonCmd(&cobra.Command{
		Use:   "stop [NAME...]",
		Short: "stop containers of the swarm (all without names): SIGTERM, grace period, kill",
	}, func(ctx context.Context, repo string, client *daemon.Client, names []string) error {
		view, err := client.Stop(ctx, repo, names)
		return renderAnswer(s.Out, view, err)
	})
}

func newSwarmResumeCmd(s Streams) *cobra.Command {
	var retry bool
	cmd := daemonCmd(&cobra.Command{
		Use:   "resume",
		Short: "reconcile the swarm and start its pending containers",
		Args:  cobra.NoArgs,
	}, func(ctx context.Context, repo string, client *daemon.Client, _ []string) error {
		view, err := client.Resume(ctx, repo, retry)
		return renderAnswer(s.Out, view, err)
	})
	cmd.Flags().BoolVar(&retry, "retry-failed", false, "also rerun failed containers, and the failed stories of containers completed with failures (on their branch)")
	return cmd
}

func newSwarmCleanupCmd(s Streams) *cobra.Command {
	var force bool
	cmd := daemonCmd(&cobra.Command{
		Use:   "cleanup",
		Short: "remove finished containers and their networks; drop them from the state",
		Args:  cobra.NoArgs,
	}, func(ctx context.Context, repo string, client *daemon.Client, _ []string) error {
		rep, err := client.Cleanup(ctx, repo, force)
		if err != nil {
			return err
		}
		printCleanup(s.Out, rep)
		return nil
	})
	cmd.Flags().BoolVar(&force, "force", false, "also remove containers holding commits nobody received (printed first)")
	return cmd
}

// renderAnswer prints the swarm view the daemon answered with, or passes
// its error on.
func renderAnswer(w io.Writer, view api.SwarmView, err error) error {
	if err != nil {
		return err
	}
	renderSwarmView(w, view)
	return nil
}

// WriteSwarmView prints a swarm view as the commands that answer with one
// (stop, resume) do: the status table and what the file has no field for.
func WriteSwarmView(w io.Writer, view api.SwarmView) { renderSwarmView(w, view) }

// WriteStatusJSON prints what `aimi swarm status --json` prints: the
// daemon's reconciled state (with detail its whole view), or, when no
// daemon answers, a note and the state file checked against its schema.
func WriteStatusJSON(ctx context.Context, client *daemon.Client, repo string, w io.Writer, detail bool) error {
	body, err := client.StatusJSON(ctx, repo)
	if errors.Is(err, daemon.ErrUnreachable) && !detail {
		fmt.Fprintln(w, "daemon not running; showing the state file")
		return showStateFile(ctx, w, repo, true)
	}
	if err != nil {
		return swarmErr(err)
	}
	return printStatusJSON(w, body, detail)
}

func printCleanup(w io.Writer, rep api.CleanupReport) {
	if len(rep.Removed) == 0 {
		fmt.Fprintln(w, "removed: none")
	} else {
		fmt.Fprintf(w, "removed: %s\n", strings.Join(rep.Removed, ", "))
	}
	for _, k := range rep.Kept {
		fmt.Fprintf(w, "kept %s: %s\n", k.Name, k.Reason)
		for _, c := range k.Commits {
			fmt.Fprintf(w, "  unreceived commit %s\n", c)
		}
	}
	for _, k := range rep.Lost {
		fmt.Fprintf(w, "LOST %s: %s\n", k.Name, k.Reason)
		for _, c := range k.Commits {
			fmt.Fprintf(w, "  lost commit %s\n", c)
		}
	}
	if len(rep.Kept) > 0 {
		fmt.Fprintln(w, "kept containers stay until their work is received; 'aimi swarm cleanup --force' removes them anyway")
	}
	if rep.StateRemoved {
		fmt.Fprintln(w, "no container left: swarm-state.json removed")
	}
	for _, n := range rep.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
}

func newSwarmLogsCmd(s Streams) *cobra.Command {
	var t swarmTarget
	var o LogsOptions
	cmd := &cobra.Command{
		Use:   "logs NAME",
		Short: "show a container's journal: time, type, story, status, output",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Name = args[0]
			req, err := LogsRequest("", o, time.Now())
			if err != nil {
				return err
			}
			return t.withClient(func(repo string, client *daemon.Client) error {
				req.RepoPath = repo
				return WriteLogs(cmd.Context(), client, req, s.Out, o.JSON)
			})
		},
	}
	t.addFlags(cmd)
	cmd.Flags().BoolVar(&o.Follow, "follow", false, "keep printing new records until the container is done")
	cmd.Flags().BoolVar(&o.JSON, "json", false, "print the journal records as NDJSON")
	cmd.Flags().IntVar(&o.Tail, "tail", 0, "print only the last N records (0: all); read from the journal's end")
	cmd.Flags().StringVar(&o.Since, "since", "", "print only records from this time on: a duration back from now (10m, 2h) or an RFC 3339 time")
	return cmd
}

// LogsOptions are `aimi swarm logs`'s argument and flags.
type LogsOptions struct {
	Name         string
	Tail         int
	Since        string
	Follow, JSON bool
}

// LogsRequest checks o as the command does and makes the daemon's request
// for repo (since relative to now).
func LogsRequest(repo string, o LogsOptions, now time.Time) (api.LogsRequest, error) {
	req := api.LogsRequest{RepoPath: repo, Name: o.Name, Follow: o.Follow, Tail: o.Tail}
	if o.Tail < 0 {
		return req, exitf(ExitUsage, "--tail %d: give a number of records, 0 for all", o.Tail)
	}
	if o.Since != "" {
		at, err := parseSince(o.Since, now)
		if err != nil {
			return req, exitf(ExitUsage, "--since %q: %v", o.Since, err)
		}
		req.Since = at
	}
	return req, nil
}

// WriteLogs prints the journal records req selects to w, one line each
// (formatRecord) or as NDJSON, until the journal (or with Follow the
// container) ends or ctx does. Its errors are the command's.
func WriteLogs(ctx context.Context, client *daemon.Client, req api.LogsRequest, w io.Writer, asJSON bool) error {
	enc := json.NewEncoder(w)
	return swarmErr(endOfStream(ctx, client.Logs(ctx, req, func(r state.Record) error {
		if asJSON {
			return enc.Encode(r)
		}
		_, err := fmt.Fprintln(w, formatRecord(r))
		return err
	})))
}

// parseSince reads --since: a duration back from now, or an RFC 3339 time.
func parseSince(v string, now time.Time) (time.Time, error) {
	if d, err := time.ParseDuration(v); err == nil {
		if d < 0 {
			return time.Time{}, fmt.Errorf("a duration back from now is positive")
		}
		return now.Add(-d), nil
	}
	at, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}, fmt.Errorf("give a duration (10m, 2h) or an RFC 3339 time (2026-11-25T18:00:00Z)")
	}
	return at, nil
}

// journalMessage is the part of a journaled message that logs shows; decoded
// loosely, since the journal already holds what the validator accepted.
type journalMessage struct {
	Type      string `json:"type"`
	Timestamp string `json:"timestamp"`
	Payload   struct {
		StoryID string   `json:"storyId"`
		Status  string   `json:"status"`
		Output  string   `json:"output"`
		Code    string   `json:"code"`
		Message string   `json:"message"`
		PRURL   *string  `json:"prUrl"`
		Errors  []string `json:"errors"`
		Branch  string   `json:"branchName"`
		Task    string   `json:"taskFilePath"`
	} `json:"payload"`
}

// formatRecord renders one journal record on one line:
// time, type, story, status, output.
func formatRecord(r state.Record) string {
	ts := r.Time.UTC().Format("2006-01-02 15:04:05")
	if r.Omitted != nil {
		// The journal's cap: the daemon says what it left out.
		return fmt.Sprintf("%s  %-15s  %-8s  %-11s  %s", ts, "journal-cap", "-", "-", oneLine(r.Reason, 200))
	}
	if r.Usage != nil {
		u := r.Usage
		line := fmt.Sprintf("%s  %-15s  %-8s  %-11d  %s: %d in, %d out, %d cache read, %d cache write; cost %.4f", ts, "daemon:usage", "-", u.Status,
			oneLine(u.Provider, 40), u.Usage.Input, u.Usage.Output, u.Usage.CacheRead, u.Usage.CacheWrite, u.Cost)
		if u.LimitedUntil != nil {
			line += fmt.Sprintf("; waiting for %s limit until %s (%s)", oneLine(u.Provider, 40), u.LimitedUntil.Local().Format(time.TimeOnly), oneLine(u.LimitSource, 60))
		}
		return line
	}
	if r.Stream == state.StreamDaemon && r.Type == state.TypeEgressDenied {
		// A request the egress proxy refused: method, host:port, why.
		return fmt.Sprintf("%s  %-15s  %-8s  %-11s  %s", ts, "daemon:"+state.TypeEgressDenied, "-", "refused", oneLine(r.Reason, 200))
	}
	if r.Stream == state.StreamDaemon && r.Type == state.TypeLand {
		// What a land did (aimi swarm logs land).
		return fmt.Sprintf("%s  %-15s  %-8s  %-11s  %s", ts, "daemon:"+state.TypeLand, "-", "-", oneLine(r.Reason, 600))
	}
	if r.Stream == state.StreamDaemon && r.Type == state.TypeGitRefused {
		// A request the git service refused, in its words.
		return fmt.Sprintf("%s  %-15s  %-8s  %-11s  %s", ts, "daemon:"+state.TypeGitRefused, "-", "refused", oneLine(r.Reason, 400))
	}
	if r.Stream == "stderr" && !r.Valid {
		return strings.TrimRight(fmt.Sprintf("%s  %-15s  %-8s  %-11s  %s", ts, "stderr", "-", "-", oneLine(r.Raw, 200)), " ")
	}
	if r.Stream == "daemon" && !r.Valid && r.Raw != "" {
		// A note of the daemon's (the inbox of permission requests).
		return fmt.Sprintf("%s  %-15s  %-8s  %-11s  %s", ts, "daemon:"+oneLine(r.Reason, 20), "-", "-", oneLine(r.Raw, 300))
	}
	if !r.Valid {
		raw := r.Raw
		if raw == "" && r.RawBase64 != "" {
			raw = "(binary line)"
		}
		return fmt.Sprintf("%s  %-15s  %-8s  %-11s  %s: %s", ts, "invalid", "-", "-", r.Reason, oneLine(raw, 120))
	}
	var m journalMessage
	_ = json.Unmarshal(r.Message, &m)
	typ := m.Type
	if typ == "" {
		typ = r.Type
	}
	if r.Stream == "daemon" {
		typ = "daemon:" + typ
	}
	story, status, out := "-", "-", ""
	p := m.Payload
	switch m.Type {
	case "progress-update":
		story, status, out = p.StoryID, p.Status, p.Output
	case "completion":
		status = p.Status
		var parts []string
		if p.PRURL != nil {
			parts = append(parts, "pr "+*p.PRURL)
		}
		parts = append(parts, p.Errors...)
		out = strings.Join(parts, "; ")
	case "error":
		status, out = p.Code, p.Message
	case "task-request":
		out = p.Task + " on " + p.Branch
	}
	line := fmt.Sprintf("%s  %-15s  %-8s  %-11s  %s", ts, typ, story, status, oneLine(out, 200))
	if r.Rejected != "" {
		line += "  [not applied: " + r.Rejected + "]"
	}
	return strings.TrimRight(line, " ")
}

func newSwarmEventsCmd(s Streams) *cobra.Command {
	var t swarmTarget
	var asJSON, allRepos bool
	cmd := &cobra.Command{
		Use:   "events",
		Short: "print the daemon's state changes as they happen, until interrupted",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return t.withClient(func(repo string, client *daemon.Client) error {
				if allRepos {
					repo = ""
				}
				enc := json.NewEncoder(s.Out)
				// On stderr, once the daemon has subscribed: a script that
				// starts this and then acts can wait for the line and miss
				// nothing its action causes.
				opened := func() { fmt.Fprintln(s.Err, EventsFollowing) }
				return endOfStream(cmd.Context(), client.EventsOpened(cmd.Context(), repo, opened, func(e api.Event) error {
					if asJSON {
						return enc.Encode(e)
					}
					_, err := fmt.Fprintln(s.Out, formatEvent(e))
					return err
				}))
			})
		},
	}
	t.addFlags(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print events as NDJSON")
	cmd.Flags().BoolVar(&allRepos, "all-repos", false, "events of every repository, not just this one")
	return cmd
}

// EventsFollowing is what `aimi swarm events` writes on stderr once the
// daemon follows the stream for it.
const EventsFollowing = "following the daemon's events (interrupt to end)"

func formatEvent(e api.Event) string {
	parts := []string{e.Time.UTC().Format("15:04:05.000"), string(e.Kind)}
	for _, p := range []string{e.ContainerName, e.Status, e.StoryID, e.StoryStatus, e.Code, e.RequestID, e.Option, e.AnsweredBy} {
		if p != "" {
			parts = append(parts, p)
		}
	}
	line := strings.Join(parts, " ")
	if e.Output != "" {
		line += ": " + oneLine(e.Output, 200)
	}
	return line
}
