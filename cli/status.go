package cli

import "github.com/spf13/cobra"

// newSwarmStatusCmd is `aimi swarm status`. Owner: the state work (issue 3).
func newSwarmStatusCmd(s Streams) *cobra.Command {
	return &cobra.Command{Use: "status", Short: "show the swarm's state"}
}
