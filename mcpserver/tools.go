package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/cli"
)

// The tools' arguments. A field without omitempty is required; the
// jsonschema tag is its description in the tool's input schema.

type startArgs struct {
	All    bool     `json:"all,omitempty" jsonschema:"run every .aimi/tasks/*-tasks.json"`
	Files  []string `json:"files,omitempty" jsonschema:"task files to run, relative to the repository (e.g. .aimi/tasks/x-tasks.json) or bare names in .aimi/tasks; committed, inside the repository"`
	Max    int      `json:"max,omitempty" jsonschema:"containers running at once (default: the daemon's swarm.max_containers)"`
	Local  bool     `json:"local,omitempty" jsonschema:"containers clone from and push to the daemon's git service, not origin"`
	Append bool     `json:"append,omitempty" jsonschema:"add to the repository's active swarm"`
	Force  bool     `json:"force,omitempty" jsonschema:"stop the active swarm and replace it"`
	// Best of N, as `aimi swarm start --attempts N --attempts-stop S`.
	Attempts     int    `json:"attempts,omitempty" jsonschema:"run each task file this many times and keep the best verified attempt (default: the daemon's swarm.attempts)"`
	AttemptsStop string `json:"attempts_stop,omitempty" jsonschema:"all (default) or first-verified: stop a task file's other attempts once one qualifies"`
}

type statusArgs struct {
	Detail bool `json:"detail,omitempty" jsonschema:"the daemon's whole view: the state plus errors, nodes, limit waits and summary"`
}

type logsArgs struct {
	Name  string `json:"name" jsonschema:"a container name from swarm_status, or land for the land journal"`
	Tail  int    `json:"tail,omitempty" jsonschema:"the last N records (default 100, at most 1000)"`
	Since string `json:"since,omitempty" jsonschema:"only records from this time on: a duration back from now (10m, 2h) or an RFC 3339 time"`
	JSON  bool   `json:"json,omitempty" jsonschema:"the records as NDJSON instead of one line each"`
}

type noArgs struct{}

type answerArgs struct {
	ID      string `json:"id,omitempty" jsonschema:"the request id from swarm_inbox (or all_from instead)"`
	Option  string `json:"option" jsonschema:"an option id the request offers, or allow or reject"`
	AllFrom string `json:"all_from,omitempty" jsonschema:"answer every pending request of this container instead of one id"`
}

type stopArgs struct {
	Names []string `json:"names,omitempty" jsonschema:"containers to stop; none: the whole swarm"`
}

type resumeArgs struct {
	RetryFailed bool `json:"retry_failed,omitempty" jsonschema:"also rerun failed containers and the failed stories of containers completed with failures"`
}

type usageArgs struct {
	Name string `json:"name,omitempty" jsonschema:"one container; none: every container of the swarm"`
}

type landArgs struct {
	Onto  string   `json:"onto,omitempty" jsonschema:"the branch to land on (default: the branch checked out now)"`
	Order []string `json:"order,omitempty" jsonschema:"container names in the order to land them"`
}

// addTools registers the tools. Descriptions say what a tool does, when
// to call it and what it answers.
func (s *Server) addTools() {
	mcp.AddTool(s.mcp, &mcp.Tool{Name: "swarm_start", Description: "Start a swarm: one sandbox container per task file, each running a coding agent through the task file's stories on its branch. Give all=true or files. Refused (with the reason and the fix) when a task file is invalid, uncommitted or outside the repository, or when a swarm is active (then pass append or force). Answers the swarm's status table; watch it with swarm_status or the aimi://swarm/state resource."}, s.start)
	mcp.AddTool(s.mcp, &mcp.Tool{Name: "swarm_status", Description: "The swarm's state as JSON (the state file's shape: each container's status and story progress, plus conflicts between branches and the last land). Containers are done when every status is completed, failed or stopped."}, s.status)
	mcp.AddTool(s.mcp, &mcp.Tool{Name: "swarm_logs", Description: "A container's journal: time, type, story, status and output per record, the last 100 by default (tail at most 1000, since to go back in time). Use it to see why a container or story failed."}, s.logs)
	mcp.AddTool(s.mcp, &mcp.Tool{Name: "swarm_inbox", Description: "The agents' permission requests waiting for a person (daemon policy ask), as JSON: id, container, story, kind, title, the command or paths it names and the options to answer with. Answer each with swarm_answer before its deadline."}, s.inbox)
	mcp.AddTool(s.mcp, &mcp.Tool{Name: "swarm_answer", Description: "Answer a permission request from swarm_inbox: id and option (an option id the request offers, or allow or reject), or all_from (a container) and option for all of its requests. Refused when the option was not offered or the request is no longer pending."}, s.answer)
	mcp.AddTool(s.mcp, &mcp.Tool{Name: "swarm_stop", Description: "Stop containers of the swarm (names; none: all of them): SIGTERM, a grace period, then kill. Their status becomes stopped; swarm_resume starts them again."}, s.stop)
	mcp.AddTool(s.mcp, &mcp.Tool{Name: "swarm_resume", Description: "Reconcile the swarm and start its pending and stopped containers; retry_failed also reruns failed ones (on their branch, keeping their commits)."}, s.resume)
	mcp.AddTool(s.mcp, &mcp.Tool{Name: "swarm_usage", Description: "Model calls, tokens (input, output, cache read, cache write) and cost per container and story, with totals, as JSON."}, s.usage)
	mcp.AddTool(s.mcp, &mcp.Tool{Name: "swarm_land", Description: "Merge the swarm's completed branches, one merge commit each, onto the integration branch aimi/land/<swarm> (started at onto, default the checked-out branch), each checked with the verify command; conflicts go to a fix-up agent. Your checkout's branches never move: the report says the command to take the work. A branch that could not land is held with the reason (the result is then an error holding the report)."}, s.land)
	mcp.AddTool(s.mcp, &mcp.Tool{Name: "swarm_pick", Description: "Best of N: make the attempt name (a container of a task file started with attempts > 1, named <container>-aK) its task file's pick instead of the daemon's. Before a land the task file's branch moves to that attempt's commits (only if it still holds the earlier pick's tip); after a land nothing landed is rewritten and the attempt is landed instead. Every attempt's commits stay kept."}, s.pick)
}

func (s *Server) start(ctx context.Context, _ *mcp.CallToolRequest, a startArgs) (*mcp.CallToolResult, any, error) {
	var out limitBuffer
	o := cli.StartOptions{All: a.All, Files: a.Files, Max: a.Max, Local: a.Local, Append: a.Append, Force: a.Force,
		Attempts: a.Attempts, AttemptsStop: a.AttemptsStop}
	// No terminal to ask on: without a selection the CLI lists the task
	// files and refuses, and so does this.
	view, err := cli.StartSwarm(ctx, cli.Streams{In: strings.NewReader(""), Out: &out, Err: &out}, s.client, s.opts.Repo, o)
	if err != nil {
		return answer(&out, err)
	}
	s.res.saw(view)
	cli.WriteStarted(&out, s.opts.Repo, view)
	return answer(&out, nil)
}

func (s *Server) status(ctx context.Context, _ *mcp.CallToolRequest, a statusArgs) (*mcp.CallToolResult, any, error) {
	var out limitBuffer
	return answer(&out, cli.WriteStatusJSON(ctx, s.client, s.opts.Repo, &out, a.Detail))
}

// logsRequest checks swarm_logs's arguments: the CLI's checks, then the
// server's bound on the records read at once.
func (s *Server) logsRequest(a logsArgs) (api.LogsRequest, error) {
	if a.Tail > maxTail {
		return api.LogsRequest{}, fmt.Errorf("tail %d: at most %d records in one answer; give a smaller tail, or since to read an earlier stretch", a.Tail, maxTail)
	}
	req, err := cli.LogsRequest(s.opts.Repo, cli.LogsOptions{Name: a.Name, Tail: a.Tail, Since: a.Since}, time.Now())
	if err != nil {
		return req, err
	}
	if req.Tail == 0 {
		req.Tail = defaultTail
	}
	return req, nil
}

func (s *Server) logs(ctx context.Context, _ *mcp.CallToolRequest, a logsArgs) (*mcp.CallToolResult, any, error) {
	var out limitBuffer
	req, err := s.logsRequest(a)
	if err != nil {
		return answer(&out, err)
	}
	return answer(&out, cli.WriteLogs(ctx, s.client, req, &out, a.JSON))
}

func (s *Server) inbox(ctx context.Context, _ *mcp.CallToolRequest, _ noArgs) (*mcp.CallToolResult, any, error) {
	var out limitBuffer
	in, err := s.client.Inbox(ctx, s.opts.Repo)
	if err == nil {
		err = cli.WriteInbox(&out, in, true, time.Now())
	}
	return answer(&out, err)
}

func (s *Server) answer(ctx context.Context, _ *mcp.CallToolRequest, a answerArgs) (*mcp.CallToolResult, any, error) {
	var out limitBuffer
	args := []string{a.Option}
	if a.ID != "" {
		args = []string{a.ID, a.Option}
	}
	req, err := cli.AnswerRequest(s.opts.Repo, a.AllFrom, args)
	if err != nil {
		return answer(&out, err)
	}
	rep, err := s.client.Answer(ctx, req)
	if err == nil {
		err = cli.WriteAnswer(&out, rep, false)
	}
	return answer(&out, err)
}

func (s *Server) stop(ctx context.Context, _ *mcp.CallToolRequest, a stopArgs) (*mcp.CallToolResult, any, error) {
	var out limitBuffer
	view, err := s.client.Stop(ctx, s.opts.Repo, a.Names)
	if err == nil {
		cli.WriteSwarmView(&out, view)
	}
	return answer(&out, err)
}

func (s *Server) resume(ctx context.Context, _ *mcp.CallToolRequest, a resumeArgs) (*mcp.CallToolResult, any, error) {
	var out limitBuffer
	view, err := s.client.Resume(ctx, s.opts.Repo, a.RetryFailed)
	if err == nil {
		s.res.saw(view)
		cli.WriteSwarmView(&out, view)
	}
	return answer(&out, err)
}

func (s *Server) usage(ctx context.Context, _ *mcp.CallToolRequest, a usageArgs) (*mcp.CallToolResult, any, error) {
	var out limitBuffer
	var names []string
	if a.Name != "" {
		names = []string{a.Name}
	}
	rep, err := cli.Usage(ctx, s.client, s.opts.Repo, names)
	if err == nil {
		enc := json.NewEncoder(&out)
		enc.SetIndent("", "  ")
		err = enc.Encode(rep)
	}
	return answer(&out, err)
}

type pickArgs struct {
	Name string `json:"name" jsonschema:"the attempt's container name, as swarm_status lists it"`
}

func (s *Server) pick(ctx context.Context, _ *mcp.CallToolRequest, a pickArgs) (*mcp.CallToolResult, any, error) {
	var out limitBuffer
	view, err := s.client.Pick(ctx, s.opts.Repo, a.Name)
	if err == nil {
		cli.WriteSwarmView(&out, view)
	}
	return answer(&out, err)
}

func (s *Server) land(ctx context.Context, _ *mcp.CallToolRequest, a landArgs) (*mcp.CallToolResult, any, error) {
	var out limitBuffer
	rep, err := s.client.Land(ctx, api.LandRequest{RepoPath: s.opts.Repo, Onto: a.Onto, Order: a.Order})
	if err != nil {
		return answer(&out, err)
	}
	if err := cli.WriteLand(&out, rep, false); err != nil {
		return answer(&out, err)
	}
	return answer(&out, cli.LandHeld(rep))
}
