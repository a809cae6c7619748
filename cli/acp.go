package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/aimi-tools/swarm/acpmsg"
)

// newACPCmd is `aimi acp`.
func newACPCmd(s Streams) *cobra.Command {
	cmd := &cobra.Command{Use: "acp", Short: "swarm message tools"}
	cmd.AddCommand(newACPValidateCmd(s))
	return cmd
}

// jsonLineReport is one line of `aimi acp validate --json`; the field order
// and names are the documented output format.
type jsonLineReport struct {
	Line   int             `json:"line"`
	Valid  bool            `json:"valid"`
	Type   string          `json:"type"`
	Errors []jsonLineError `json:"errors"`
}

type jsonLineError struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

func newACPValidateCmd(s Streams) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "validate [--json] [FILE...]",
		Short: "check swarm messages (NDJSON), one per line",
		Long: `Check every line of each FILE (standard input when there is none, or for "-")
against the swarm message spec: the envelope, the four payloads, the 64 KiB line
limit, UTF-8, one JSON object per line.

Exit status: 0 when every line is valid, 1 when any line is invalid, 2 on a
usage or read error.`,
		Example: `  aimi acp validate messages.ndjson
  docker logs c1 | aimi acp validate --json`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				args = []string{"-"}
			}
			invalid, ioErr := false, false
			for _, name := range args {
				bad, err := validateACPFile(s, name, asJSON)
				invalid = invalid || bad
				if err != nil {
					ioErr = true
					fmt.Fprintf(s.Err, "aimi: %v\n", err)
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
	cmd.Flags().BoolVar(&asJSON, "json", false, `print one JSON object per input line: {"line":N,"valid":..,"type":..,"errors":[{"field":..,"message":..}]}`)
	return cmd
}

// validateACPFile checks one input; it reports whether any line was invalid
// and returns an error when the input could not be read.
func validateACPFile(s Streams, name string, asJSON bool) (invalid bool, err error) {
	var in io.Reader = s.In
	display := "<stdin>"
	if name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return false, fmt.Errorf("read messages: %w", err)
		}
		defer f.Close()
		in, display = f, name
	}
	enc := json.NewEncoder(s.Out)
	enc.SetEscapeHTML(false)
	r := acpmsg.NewReader(in)
	lines, bad := 0, 0
	for {
		l, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return bad > 0, fmt.Errorf("read messages from %s after line %d: %w", display, lines, err)
		}
		lines++
		if l.Err != nil {
			bad++
		}
		if asJSON {
			rep := jsonLineReport{Line: l.Number, Valid: l.Err == nil, Type: string(l.Msg.Type), Errors: []jsonLineError{}}
			for _, fe := range acpmsg.FieldErrors(l.Err) {
				field := fe.Field
				fe.Field = ""
				rep.Errors = append(rep.Errors, jsonLineError{Field: field, Message: fe.String()})
			}
			if err := enc.Encode(rep); err != nil {
				return bad > 0, fmt.Errorf("write report: %w", err)
			}
			continue
		}
		if l.Err == nil {
			continue
		}
		prefix := fmt.Sprintf("%s:%d:", display, l.Number)
		if l.Msg.Type != "" {
			prefix += " " + string(l.Msg.Type) + ":"
		}
		for _, fe := range acpmsg.FieldErrors(l.Err) {
			fmt.Fprintf(s.Out, "%s %s\n", prefix, fe)
		}
	}
	if !asJSON {
		fmt.Fprintf(s.Out, "%s: %d lines, %d valid, %d invalid\n", display, lines, lines-bad, bad)
	}
	return bad > 0, nil
}
