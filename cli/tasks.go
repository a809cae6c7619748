package cli

import "github.com/spf13/cobra"

// newTasksCmd is `aimi tasks`. Owner: the task-file work (issue 2).
func newTasksCmd(s Streams) *cobra.Command {
	return &cobra.Command{Use: "tasks", Short: "task file tools"}
}
