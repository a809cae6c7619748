package cli

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"
)

// Exit codes shared by every command.
const (
	ExitOK      = 0 // success
	ExitInvalid = 1 // the input was read and found invalid, or the job failed
	ExitUsage   = 2 // usage or I/O error
)

// Streams are the standard streams a command reads and writes.
type Streams struct {
	In  io.Reader
	Out io.Writer
	Err io.Writer
}

// ExitError carries an exit code through cobra's error return.
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("exit %d", e.Code)
	}
	return e.Err.Error()
}

func (e *ExitError) Unwrap() error { return e.Err }

// exitf returns an ExitError with a formatted message.
func exitf(code int, format string, args ...any) error {
	return &ExitError{Code: code, Err: fmt.Errorf(format, args...)}
}

// NewRoot builds the `aimi` command tree.
func NewRoot(s Streams) *cobra.Command {
	root := &cobra.Command{
		Use:           "aimi",
		Short:         "aimi swarm: run task files in Docker sandboxes",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetIn(s.In)
	root.SetOut(s.Out)
	root.SetErr(s.Err)
	root.AddCommand(newACPCmd(s), newTasksCmd(s), newSwarmCmd(s))
	return root
}

// Run executes the command line and returns the process exit code.
func Run(ctx context.Context, args []string, s Streams) int {
	root := NewRoot(s)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return ExitOK
	}
	var ee *ExitError
	if errors.As(err, &ee) {
		if ee.Err != nil {
			fmt.Fprintln(s.Err, "aimi:", ee.Err)
		}
		return ee.Code
	}
	fmt.Fprintln(s.Err, "aimi:", err)
	return ExitUsage
}
