package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/daemon"
	"github.com/aimi-tools/swarm/internal/termsafe"
)

// ExitDaemon is the exit code of `aimi swarm` commands when no daemon answers
// on the socket. The codes of `aimi swarm`:
//
//	0  success
//	1  a container failed (start --follow), the daemon refused the request
//	   (invalid task file, active swarm, no swarm, unknown container), or
//	   there is no state file (status without a daemon)
//	2  usage: bad flags, nothing selected without a terminal to ask on
//	3  no daemon running (the error says how to start it: daemon.StartHint)
const ExitDaemon = 3

// newSwarmCmd is `aimi swarm`. Its `status` asks the daemon first and
// falls back to the state file alone (status.go).
func newSwarmCmd(s Streams) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "swarm",
		Short: "start, watch and stop swarms",
		Long: `Run task files in sandbox containers through the aimid daemon.

Exit codes: 0 ok; 1 a container failed or the daemon refused the request;
2 usage; 3 no daemon running (` + daemon.StartHint + `).`,
	}
	cmd.AddCommand(
		newSwarmStartCmd(s),
		newSwarmDaemonStatusCmd(s),
		newSwarmStopCmd(s),
		newSwarmResumeCmd(s),
		newSwarmCleanupCmd(s),
		newSwarmFetchCmd(s),
		newSwarmLandCmd(s),
		newSwarmPickCmd(s),
		newSwarmLogsCmd(s),
		newSwarmUsageCmd(s),
		newSwarmEventsCmd(s),
		newSwarmInboxCmd(s),
		newSwarmAnswerCmd(s),
		newSwarmEgressCmd(s),
		newSwarmUICmd(s),
	)
	return cmd
}

// swarmTarget holds the flags every daemon command shares.
type swarmTarget struct {
	repo   string
	socket string
}

func (t *swarmTarget) addFlags(cmd *cobra.Command) {
	cmd.Flags().StringVar(&t.repo, "repo", "", "repository (default: the directory holding .aimi at or above the current one)")
	cmd.Flags().StringVar(&t.socket, "socket", "", "daemon socket (default $AIMI_SOCKET, $XDG_RUNTIME_DIR/aimi/aimid.sock or /run/aimi/aimid.sock)")
}

// resolve returns the repository path the daemon keys swarms by, and a client.
func (t *swarmTarget) resolve() (string, *daemon.Client, error) {
	repo, err := swarmRepoRoot(t.repo)
	if err != nil {
		return "", nil, err
	}
	return repo, daemon.NewClient(t.socket), nil
}

// swarmRepoRoot is the state issue's repository lookup (findStateRoot: dir,
// default the working directory, walked up to the first directory holding
// .aimi) with symlinks resolved, so that one repository always has the same
// key in the daemon and in its containers' org.aimi.project label.
func swarmRepoRoot(dir string) (string, error) {
	root, err := findStateRoot(dir)
	if err != nil {
		return "", err
	}
	real, err := filepath.EvalSymlinks(root)
	if err != nil {
		return "", exitf(ExitUsage, "repository %s: %v; pass --repo with an existing directory", root, err)
	}
	return real, nil
}

// RepoRoot is the repository the daemon keys swarms by, as every `aimi
// swarm` command finds it from --repo (dir; "" is the working directory).
func RepoRoot(dir string) (string, error) { return swarmRepoRoot(dir) }

// DaemonError is the error a command reports for a daemon or client error:
// an *ExitError with the command's exit code and message.
func DaemonError(err error) error { return swarmErr(err) }

// withClient runs fn with the target's repository and a daemon client,
// closed afterwards, and turns the daemon's errors into exit codes.
func (t *swarmTarget) withClient(fn func(repo string, client *daemon.Client) error) error {
	repo, client, err := t.resolve()
	if err != nil {
		return err
	}
	defer client.Close()
	return swarmErr(fn(repo, client))
}

// endOfStream is the error of a stream that ended: none when the user
// interrupted it (ctx done), which is how following normally ends.
func endOfStream(ctx context.Context, err error) error {
	if errors.Is(err, context.Canceled) && ctx.Err() != nil {
		return nil
	}
	return err
}

// swarmErr turns a daemon or client error into the command's exit code.
func swarmErr(err error) error {
	if err == nil {
		return nil
	}
	var ee *ExitError
	if errors.As(err, &ee) {
		return err
	}
	if errors.Is(err, daemon.ErrUnreachable) || errors.Is(err, daemon.ErrSocketPermission) {
		return &ExitError{Code: ExitDaemon, Err: err}
	}
	var ae *api.APIError
	if errors.As(err, &ae) {
		return &ExitError{Code: ExitInvalid, Err: err}
	}
	if errors.Is(err, context.Canceled) {
		return &ExitError{Code: ExitUsage, Err: errors.New("interrupted")}
	}
	return &ExitError{Code: ExitUsage, Err: err}
}

// isTerminal reports whether the stream is a terminal. A stream may answer
// for itself with IsTerminal() (tests do); otherwise only an *os.File on a
// tty is.
func isTerminal(v any) bool {
	if tw, ok := v.(*termsafe.Writer); ok {
		v = tw.Unwrap()
	}
	if t, ok := v.(interface{ IsTerminal() bool }); ok {
		return t.IsTerminal()
	}
	f, ok := v.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// terminalWidth is the column count of a terminal stream, 0 when unknown.
func terminalWidth(v any) int {
	if tw, ok := v.(*termsafe.Writer); ok {
		v = tw.Unwrap()
	}
	f, ok := v.(*os.File)
	if !ok {
		return 0
	}
	ws, err := unix.IoctlGetWinsize(int(f.Fd()), unix.TIOCGWINSZ)
	if err != nil {
		return 0
	}
	return int(ws.Col)
}

// printContainerErrors lists what the state file has no field for: errors
// per container (OOM, timeout, crash, the runner's own), and exit codes.
func printContainerErrors(w io.Writer, v api.SwarmView) {
	for _, c := range v.Containers {
		for _, e := range c.Errors {
			if e.Code != "" {
				fmt.Fprintf(w, "%s: %s: %s\n", c.Name, e.Code, e.Message)
			} else {
				fmt.Fprintf(w, "%s: %s\n", c.Name, e.Message)
			}
		}
	}
}
