package cli

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/aimi-tools/swarm/internal/termsafe"
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

// NewRoot builds the `aimi` command tree, with the commands more makes
// (front ends that live outside this package, such as `aimi mcp`).
func NewRoot(s Streams, more ...func(Streams) *cobra.Command) *cobra.Command {
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
	for _, m := range more {
		root.AddCommand(m(s))
	}
	return root
}

// Run executes the command line and returns the process exit code.
//
// Everything a command writes goes through termsafe: daemon answers quote
// container output, agent messages and task files, any of which may carry
// escape sequences meant for the user's terminal. JSON stays the same JSON
// (see termsafe); the commands' own cursor moves use writeControl.
func Run(ctx context.Context, args []string, s Streams, more ...func(Streams) *cobra.Command) int {
	out, errOut := safeWriter(s.Out), safeWriter(s.Err)
	defer out.Flush()
	defer errOut.Flush()
	s = Streams{In: s.In, Out: out, Err: errOut}
	root := NewRoot(s, more...)
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

func safeWriter(w io.Writer) *termsafe.Writer {
	if tw, ok := w.(*termsafe.Writer); ok {
		return tw
	}
	return termsafe.NewWriter(w)
}

// writeControl writes a terminal control sequence of the command's own past
// the termsafe filter.
func writeControl(w io.Writer, seq string) {
	if tw, ok := w.(*termsafe.Writer); ok {
		tw.WriteControl(seq)
		return
	}
	io.WriteString(w, seq)
}
