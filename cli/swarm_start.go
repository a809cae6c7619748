package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/attempts"
	"github.com/aimi-tools/swarm/daemon"
	"github.com/aimi-tools/swarm/tasks"
)

// swarmTasksDir is where task files live, relative to the repository.
const swarmTasksDir = tasks.Dir

type swarmStartFlags struct {
	swarmTarget
	all            bool
	file           []string
	files          []string
	max            int
	append, force  bool
	image          string
	local, follow  bool
	followInterval time.Duration
	attempts       int
	attemptsStop   string
}

func newSwarmStartCmd(s Streams) *cobra.Command {
	var f swarmStartFlags
	cmd := &cobra.Command{
		Use:   "start [--all | --file F | --files A,B]",
		Short: "run task files, one sandbox container each",
		Long: `Start a swarm: one sandbox container per task file, at most --max at once.

Without --all, --file or --files, the task files in .aimi/tasks are listed
(newest first) and, on a terminal, you are asked which to run.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runSwarmStart(cmd, s, &f) },
	}
	f.addFlags(cmd)
	fl := cmd.Flags()
	fl.BoolVar(&f.all, "all", false, "run every .aimi/tasks/*-tasks.json")
	fl.StringArrayVar(&f.file, "file", nil, "run this task file (repeatable)")
	fl.StringSliceVar(&f.files, "files", nil, "run these task files (comma-separated)")
	fl.IntVar(&f.max, "max", 0, "containers running at once (default from config, swarm.max_containers)")
	fl.BoolVar(&f.append, "append", false, "add to the repository's active swarm")
	fl.BoolVar(&f.force, "force", false, "stop the active swarm and replace it")
	fl.StringVar(&f.image, "image", "", "sandbox image (default from config, sandbox.image)")
	fl.BoolVar(&f.local, "local", false, "containers clone from and push to the daemon's git service, not origin")
	fl.BoolVar(&f.follow, "follow", false, "show live progress until every container is done; exit 1 if any failed")
	fl.DurationVar(&f.followInterval, "refresh", time.Second, "with --follow: the longest time between two refreshes")
	fl.IntVar(&f.attempts, "attempts", 0, "run each task file N times and keep the best attempt (default from config, swarm.attempts; docs/attempts.md)")
	fl.StringVar(&f.attemptsStop, "attempts-stop", "", "all or first-verified: stop a task file's other attempts once one qualifies (default from config, swarm.attempts_stop)")
	return cmd
}

func runSwarmStart(cmd *cobra.Command, s Streams, f *swarmStartFlags) error {
	o := StartOptions{All: f.all, Files: append(append([]string(nil), f.file...), f.files...), Max: f.max,
		Append: f.append, Force: f.force, Local: f.local, Image: f.image, Attempts: f.attempts, AttemptsStop: f.attemptsStop}
	if err := o.Check(); err != nil {
		return err
	}
	if f.followInterval <= 0 {
		return exitf(ExitUsage, "--refresh %v: use a positive duration", f.followInterval)
	}
	repo, client, err := f.resolve()
	if err != nil {
		return err
	}
	defer client.Close()
	ctx := cmd.Context()
	view, err := StartSwarm(ctx, s, client, repo, o)
	if err != nil {
		return err
	}
	if !f.follow {
		WriteStarted(s.Out, repo, view)
		return nil
	}
	if view.State != nil {
		fmt.Fprintf(s.Out, "swarm %s: %d container(s) in %s\n", view.State.SwarmID, len(view.State.Containers), repo)
	}
	return followSwarm(ctx, s, client, repo, f.followInterval, followSettle)
}

// StartOptions are `aimi swarm start`'s selection (All, or Files; neither:
// ask on a terminal) and the request's settings.
type StartOptions struct {
	All                  bool
	Files                []string
	Max                  int
	Append, Force, Local bool
	Image                string
	// Attempts and AttemptsStop: best of N (0 and "": the configuration's).
	Attempts     int
	AttemptsStop string
}

// Check refuses options that contradict each other, as the command does.
func (o StartOptions) Check() error {
	if o.All && len(o.Files) > 0 {
		return exitf(ExitUsage, "--all and --file/--files exclude each other; use one")
	}
	if o.Append && o.Force {
		return exitf(ExitUsage, "--append and --force exclude each other; use one")
	}
	if o.Max < 0 {
		return exitf(ExitUsage, "--max %d: use a positive number of containers", o.Max)
	}
	if err := attempts.CheckCount(o.Attempts); err != nil {
		return exitf(ExitUsage, "--attempts: %v", err)
	}
	if !attempts.ValidStop(o.AttemptsStop) {
		return exitf(ExitUsage, "--attempts-stop %q: use %s or %s", o.AttemptsStop, attempts.StopAll, attempts.StopFirstVerified)
	}
	return nil
}

// StartSwarm is `aimi swarm start` up to the daemon's answer: it checks o,
// selects the task files (without a selection it lists them on s.Out and
// asks on s.In when that is a terminal, else refuses) and asks the daemon.
// Its errors are the command's (ExitError).
func StartSwarm(ctx context.Context, s Streams, client *daemon.Client, repo string, o StartOptions) (api.SwarmView, error) {
	if err := o.Check(); err != nil {
		return api.SwarmView{}, err
	}
	var selected []string
	switch {
	case o.All:
		found, err := discoverTaskFiles(repo)
		if err != nil {
			return api.SwarmView{}, err
		}
		if len(found) == 0 {
			return api.SwarmView{}, exitf(ExitUsage, "no task files in %s; write one (e.g. with the aimi planning tools) or pass --file", filepath.Join(repo, swarmTasksDir))
		}
		for _, t := range found {
			selected = append(selected, t.Path)
		}
	case len(o.Files) > 0:
		for _, p := range o.Files {
			selected = append(selected, taskFileArg(repo, p))
		}
	default:
		var err error
		if selected, err = chooseTaskFiles(s, repo); err != nil {
			return api.SwarmView{}, err
		}
	}
	view, err := client.Start(ctx, api.StartRequest{
		RepoPath: repo, TaskFiles: selected, Max: o.Max,
		Append: o.Append, Force: o.Force, Local: o.Local, Image: o.Image,
		Attempts: o.Attempts, AttemptsStop: o.AttemptsStop,
	})
	return view, swarmErr(err)
}

// WriteStarted prints what start prints once the daemon started the swarm.
func WriteStarted(w io.Writer, repo string, view api.SwarmView) {
	if view.State != nil {
		fmt.Fprintf(w, "swarm %s: %d container(s) in %s\n", view.State.SwarmID, len(view.State.Containers), repo)
	}
	renderSwarmView(w, view)
	fmt.Fprintln(w, "follow with 'aimi swarm status --watch' or 'aimi swarm events'")
}

// taskFile is one discovered task file.
type taskFile struct {
	Path    string // repo-relative, slash-separated
	ModTime time.Time
	Branch  string
	Stories int
	Problem string // why the file could not be read; the daemon has the final word
}

// discoverTaskFiles lists .aimi/tasks/*-tasks.json, newest first. Files are
// only read for the listing (branch, story count); validation is the
// daemon's, before it creates anything.
func discoverTaskFiles(repo string) ([]taskFile, error) {
	paths, err := filepath.Glob(filepath.Join(repo, swarmTasksDir, "*-tasks.json"))
	if err != nil {
		return nil, exitf(ExitUsage, "list task files: %v", err)
	}
	out := make([]taskFile, 0, len(paths))
	for _, p := range paths {
		tf := taskFile{Path: swarmTasksDir + "/" + filepath.Base(p)}
		fi, err := os.Stat(p)
		if err != nil {
			tf.Problem = err.Error()
		} else {
			tf.ModTime = fi.ModTime()
		}
		if data, err := tasks.ReadFileIn(repo, tf.Path); err != nil {
			tf.Problem = err.Error()
		} else {
			var file tasks.File
			if err := json.Unmarshal(data, &file); err != nil {
				tf.Problem = "not a task file: " + err.Error()
			} else {
				tf.Branch, tf.Stories = file.Metadata.BranchName, len(file.UserStories)
			}
		}
		out = append(out, tf)
	}
	sort.SliceStable(out, func(i, j int) bool {
		if !out[i].ModTime.Equal(out[j].ModTime) {
			return out[i].ModTime.After(out[j].ModTime)
		}
		return out[i].Path < out[j].Path
	})
	return out, nil
}

// taskFileArg turns a --file argument into the repo-relative path the daemon
// expects: a path that exists relative to the working directory (or is
// absolute) is made relative to the repo; a bare name found in .aimi/tasks
// is taken from there; anything else is passed on for the daemon to judge.
func taskFileArg(repo, arg string) string {
	abs := arg
	if !filepath.IsAbs(arg) {
		if wd, err := os.Getwd(); err == nil {
			abs = filepath.Join(wd, arg)
		}
	}
	if _, err := os.Stat(abs); err == nil {
		if real, err := filepath.EvalSymlinks(abs); err == nil {
			abs = real
		}
		if rel, err := filepath.Rel(repo, abs); err == nil && !strings.HasPrefix(rel, "..") {
			return filepath.ToSlash(rel)
		}
		return arg
	}
	if !strings.Contains(arg, "/") {
		if _, err := os.Stat(filepath.Join(repo, swarmTasksDir, arg)); err == nil {
			return swarmTasksDir + "/" + arg
		}
	}
	return filepath.ToSlash(arg)
}

func listTaskFiles(w io.Writer, found []taskFile) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "#\tTASK FILE\tBRANCH\tSTORIES\tMODIFIED")
	for i, t := range found {
		if t.Problem != "" {
			fmt.Fprintf(tw, "%d\t%s\t(%s)\t\t\n", i+1, t.Path, t.Problem)
			continue
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%s\n", i+1, t.Path, t.Branch, t.Stories, t.ModTime.Local().Format("2006-01-02 15:04"))
	}
	tw.Flush()
}

// chooseTaskFiles lists the task files and asks on a terminal; without one a
// selection flag is required (a script must say what it runs).
func chooseTaskFiles(s Streams, repo string) ([]string, error) {
	found, err := discoverTaskFiles(repo)
	if err != nil {
		return nil, err
	}
	if len(found) == 0 {
		return nil, exitf(ExitUsage, "no task files in %s; write one or pass --file", filepath.Join(repo, swarmTasksDir))
	}
	listTaskFiles(s.Out, found)
	if !isTerminal(s.In) {
		return nil, exitf(ExitUsage, "no task file selected and stdin is not a terminal; pass --all, --file F or --files A,B")
	}
	br := bufio.NewReader(s.In)
	for {
		fmt.Fprint(s.Out, "Run which? numbers (e.g. 1,3), 'all', or empty to cancel: ")
		line, err := br.ReadString('\n')
		line = strings.TrimSpace(line)
		if line == "" {
			if err != nil && err != io.EOF {
				return nil, exitf(ExitUsage, "read answer: %v", err)
			}
			return nil, exitf(ExitUsage, "nothing selected")
		}
		picked, perr := parseSelection(line, len(found))
		if perr == nil {
			out := make([]string, 0, len(picked))
			for _, i := range picked {
				out = append(out, found[i].Path)
			}
			return out, nil
		}
		fmt.Fprintln(s.Out, perr)
		if err != nil {
			return nil, exitf(ExitUsage, "nothing selected")
		}
	}
}

// parseSelection reads "1,3", "2 4", "1-3" or "all" into 0-based indexes.
func parseSelection(s string, n int) ([]int, error) {
	if strings.EqualFold(s, "all") {
		out := make([]int, n)
		for i := range out {
			out[i] = i
		}
		return out, nil
	}
	seen := map[int]bool{}
	var out []int
	add := func(i int) error {
		if i < 1 || i > n {
			return fmt.Errorf("%d is not in the list; choose 1 to %d", i, n)
		}
		if !seen[i] {
			seen[i] = true
			out = append(out, i-1)
		}
		return nil
	}
	for _, field := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' }) {
		lo, hi, isRange := strings.Cut(field, "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			return nil, fmt.Errorf("%q is not a number; answer like 1,3 or all", field)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a {
				return nil, fmt.Errorf("%q is not a range; answer like 1-3", field)
			}
		}
		for i := a; i <= b; i++ {
			if err := add(i); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}
