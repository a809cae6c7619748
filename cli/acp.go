package cli

import "github.com/spf13/cobra"

// newACPCmd is `aimi acp`. Owner: the acpmsg work (issue 2).
func newACPCmd(s Streams) *cobra.Command {
	return &cobra.Command{Use: "acp", Short: "swarm message tools"}
}
