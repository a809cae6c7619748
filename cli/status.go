package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/aimi-tools/swarm/state"
)

// newSwarmStatusCmd is `aimi swarm status` from the files alone:
// it reads .aimi/swarm-state.json and prints a table, or with --json the
// file's content once it is known to match the schema. No state file is
// exit 1 with how to make one; one it cannot read is exit 1 with the
// reason (the field, when one is to blame), and is left as it is.
func newSwarmStatusCmd(s Streams) *cobra.Command {
	var repo string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "status",
		Short: "show the swarm's state",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			root, err := findStateRoot(repo)
			if err != nil {
				return err
			}
			return showStateFile(cmd.Context(), s.Out, root, asJSON)
		},
	}
	cmd.Flags().StringVar(&repo, "repo", "", "repository (default: the directory holding .aimi at or above the current one)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print swarm-state.json's content (checked against the schema)")
	return cmd
}

// showStateFile prints the state file of the repository at root.
func showStateFile(ctx context.Context, w io.Writer, root string, asJSON bool) error {
	st := state.Open(root)
	sw, err := st.Load(ctx)
	if errors.Is(err, state.ErrNoState) {
		return exitf(ExitInvalid, "no swarm state in %s (%s does not exist); start a swarm with 'aimi swarm start'", root, st.Path())
	}
	if err != nil {
		return exitf(ExitInvalid, "%v", err)
	}
	if !asJSON {
		RenderStatus(w, sw)
		return nil
	}
	// Print the bytes as they are on disk, not a re-encoding: other tools
	// wrote them too. The file may have been replaced since Load; read it
	// once and check what is printed.
	b, err := st.ReadFile()
	if err != nil {
		return exitf(ExitInvalid, "%v", err)
	}
	if err := state.CheckFile(b); err != nil {
		return exitf(ExitInvalid, "%s does not match the swarm-state schema: %v", st.Path(), err)
	}
	if _, err := w.Write(b); err != nil {
		return exitf(ExitUsage, "write: %v", err)
	}
	if len(b) > 0 && b[len(b)-1] != '\n' {
		fmt.Fprintln(w)
	}
	return nil
}

// findStateRoot makes dir (default: the working directory) absolute and
// walks up to the first directory holding .aimi; without one, dir itself.
func findStateRoot(dir string) (string, error) {
	if dir == "" {
		wd, err := os.Getwd()
		if err != nil {
			return "", exitf(ExitUsage, "find the current directory: %v; pass --repo", err)
		}
		dir = wd
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", exitf(ExitUsage, "repository %s: %v", dir, err)
	}
	for d := abs; ; d = filepath.Dir(d) {
		if fi, err := os.Stat(filepath.Join(d, state.DirName)); err == nil && fi.IsDir() {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return abs, nil
		}
	}
}

// RenderStatus prints the swarm as the status table:
//
//	Swarm 6f1c2a3b-...  updated 2026-11-22T10:31:00Z
//	#  CONTAINER        TASK FILE                               BRANCH     STATUS     PROGRESS  STORIES             PR
//	1  aimi-swarm-auth  .aimi/tasks/2026-03-01-auth-tasks.json  feat/auth  completed  5/5       -                   https://...
//	Summary: 1 completed, 1 running, 1 failed (3 total)
//
// PROGRESS is completed/total; STORIES lists the stories that are not
// completed (failed, running, pending, skipped: skipped stories count in no
// storyProgress counter, so they are derived as the rest of total). The
// summary counts a completed container with failed stories as "completed
// with failures" (state.Summarize); its STATUS stays the file's completed.
func RenderStatus(w io.Writer, s *state.Swarm) {
	fmt.Fprintf(w, "Swarm %s  updated %s\n", s.SwarmID, s.UpdatedAt.UTC().Format(time.RFC3339))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "#\tCONTAINER\tTASK FILE\tBRANCH\tSTATUS\tPROGRESS\tSTORIES\tPR")
	for i, c := range s.Containers {
		pr := "-"
		if c.PRURL != nil {
			pr = *c.PRURL
		}
		p := c.StoryProgress
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%d/%d\t%s\t%s\n", i+1, c.ContainerName, c.TaskFilePath,
			c.BranchName, c.Status, p.Completed, p.Total, storiesCell(p), pr)
	}
	tw.Flush()
	fmt.Fprintf(w, "Summary: %s\n", state.Summarize(s))
}

// storiesCell lists the non-zero counts other than completed.
func storiesCell(p state.Progress) string {
	var parts []string
	for _, kv := range []struct {
		n    int
		name string
	}{{p.Failed, "failed"}, {p.InProgress, "running"}, {p.Pending, "pending"}, {p.Skipped(), "skipped"}} {
		if kv.n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", kv.n, kv.name))
		}
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ", ")
}
