package mcpserver

import (
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/aimi-tools/swarm/cli"
)

// Version is the server's version in the MCP handshake.
const Version = "1"

// NewCommand is `aimi mcp`, for cli.Run.
func NewCommand(s cli.Streams) *cobra.Command {
	var repo, socket, printConfig string
	cmd := &cobra.Command{
		Use:   "mcp",
		Short: "serve MCP on stdio: a coding agent starts, watches, answers and lands swarms (tools swarm_*)",
		Long: `Serve the Model Context Protocol on stdin and stdout for a coding agent
(Claude Code, Codex, Gemini CLI, opencode): tools to start, watch, answer,
stop, resume and land the swarm of this repository, and its state and
journals as aimi:// resources with change notifications. See docs/mcp.md.

--print-config CLIENT prints the client's configuration snippet instead
(` + strings.Join(ClientNames(), ", ") + `).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if printConfig != "" {
				return printClientConfig(s, printConfig, repo, socket)
			}
			root, err := cli.RepoRoot(repo)
			if err != nil {
				return err
			}
			log := slog.New(slog.NewTextHandler(s.Err, &slog.HandlerOptions{Level: slog.LevelWarn}))
			srv := New(Options{Repo: root, Socket: socket, Secrets: KnownSecrets(os.Environ()), Version: Version, Logger: log})
			if err := srv.Run(cmd.Context(), &mcp.StdioTransport{}); err != nil {
				return &cli.ExitError{Code: cli.ExitUsage, Err: fmt.Errorf("serve MCP on stdio: %w", err)}
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&repo, "repo", "", "repository (default: the directory holding .aimi at or above the current one)")
	fl.StringVar(&socket, "socket", "", "daemon socket (default $AIMI_SOCKET, $XDG_RUNTIME_DIR/aimi/aimid.sock or /run/aimi/aimid.sock)")
	fl.StringVar(&printConfig, "print-config", "", "print the configuration snippet for this client and exit: "+strings.Join(ClientNames(), ", "))
	return cmd
}

// printClientConfig prints the snippet on stdout (to paste or redirect
// into the file) and where it goes on stderr.
func printClientConfig(s cli.Streams, client, repo, socket string) error {
	command := []string{"aimi", "mcp"}
	if repo != "" {
		command = append(command, "--repo", repo)
	}
	if socket != "" {
		command = append(command, "--socket", socket)
	}
	snippet, where, err := PrintConfig(client, command)
	if err != nil {
		return &cli.ExitError{Code: cli.ExitUsage, Err: err}
	}
	fmt.Fprint(s.Out, snippet)
	fmt.Fprintln(s.Err, where)
	return nil
}
