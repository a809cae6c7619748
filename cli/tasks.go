package cli

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/aimi-tools/swarm/tasks"
)

// newTasksCmd is `aimi tasks`.
func newTasksCmd(s Streams) *cobra.Command {
	cmd := &cobra.Command{Use: "tasks", Short: "task file tools"}
	cmd.AddCommand(newTasksValidateCmd(s))
	return cmd
}

func newTasksValidateCmd(s Streams) *cobra.Command {
	return &cobra.Command{
		Use:   "validate FILE...",
		Short: "check task files (tasks.json, schema 3.0)",
		Long: `Check each task file against the schema 3.0 rules: metadata, story fields and
lengths, unique ids and priorities, and a dependency graph without cycles.
Every problem is printed as two lines, "Error: ..." and "Fix: ...", naming the
story and field. A story without "Typecheck passes" is a warning only.
Files validated together must name different branches (metadata.branchName):
a swarm runs each task file on its own branch.
"-" reads a file from standard input.

Exit status: 0 when every file is valid, 1 when any is invalid, 2 when a file
cannot be read.`,
		Example: `  aimi tasks validate .aimi/tasks/*.json`,
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			invalid, ioErr := false, false
			branches := map[string]string{} // branch -> the first valid file that has it
			for _, name := range args {
				data, err := readTaskFile(s, name)
				if err != nil {
					ioErr = true
					fmt.Fprintf(s.Err, "aimi: %v\n", err)
					continue
				}
				f, problems, warnings := tasks.Check(data)
				if f != nil {
					if other, taken := branches[f.Metadata.BranchName]; taken {
						problems = tasks.Problems{tasks.BranchTaken(f.Metadata.BranchName, name, other)}
					} else {
						branches[f.Metadata.BranchName] = name
					}
				}
				if len(problems) > 0 {
					invalid = true
					fmt.Fprintf(s.Out, "%s: invalid (%s)\n", name, plural(problems.Count(), "problem"))
					for _, p := range problems {
						fmt.Fprintln(s.Out, p.String())
					}
				} else {
					fmt.Fprintf(s.Out, "%s: valid (%s)\n", name, plural(len(f.UserStories), "story"))
				}
				for _, w := range warnings {
					fmt.Fprintf(s.Out, "Warning: %s\nFix: %s\n", w.Error, w.Fix)
				}
			}
			switch {
			case ioErr:
				return &ExitError{Code: ExitUsage}
			case invalid:
				return &ExitError{Code: ExitInvalid}
			}
			return nil
		},
	}
}

func readTaskFile(s Streams, name string) ([]byte, error) {
	if name == "-" {
		return tasks.ReadLimited(s.In)
	}
	data, err := tasks.ReadFile(name)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%w (task files live under .aimi/tasks/)", err)
	}
	return data, err
}

func plural(n int, word string) string {
	if n == 1 {
		return fmt.Sprintf("1 %s", word)
	}
	if word == "story" {
		return fmt.Sprintf("%d stories", n)
	}
	return fmt.Sprintf("%d %ss", n, word)
}
