package cli

import "github.com/spf13/cobra"

// newSwarmCmd is `aimi swarm`. Owner: the daemon work (issue 5); `status`
// from the files alone lives in status.go (issue 3).
func newSwarmCmd(s Streams) *cobra.Command {
	cmd := &cobra.Command{Use: "swarm", Short: "start, watch and stop swarms"}
	cmd.AddCommand(newSwarmStatusCmd(s))
	return cmd
}
