// Command checkstate is the demo's last check: it reads a repository's
// .aimi/swarm-state.json (read-only: it never moves a bad file aside),
// validates it with state.Decode, Swarm.Validate and the JSON Schema the
// repository carries (spec/swarm-state.schema.json, embedded), prints one
// line per container and exits 1 unless every container completed and the
// file is valid. Of a task file run several times (its attempts section,
// best of N), the picked attempt must have completed; the others may have
// ended otherwise (their work is kept), and one line says which was
// picked.
//
//	go run ./scripts/checkstate -repo .demo/repo [-want 3]
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/aimi-tools/swarm/attempts"
	"github.com/aimi-tools/swarm/spec"
	"github.com/aimi-tools/swarm/state"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "checkstate:", err)
		os.Exit(1)
	}
}

func run(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("checkstate", flag.ContinueOnError)
	repo := fs.String("repo", ".", "repository holding .aimi/swarm-state.json")
	want := fs.Int("want", 0, "number of containers expected (0: any)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	path := filepath.Join(*repo, ".aimi", "swarm-state.json")
	raw, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read state file: %w", err)
	}
	sw, err := state.Decode(raw)
	if err != nil {
		return fmt.Errorf("%s does not parse: %w", path, err)
	}
	if err := sw.Validate(); err != nil {
		return fmt.Errorf("%s breaks the schema: %w", path, err)
	}
	if err := spec.ValidateState(raw); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	var bad []string
	losers := map[string]bool{}
	for _, set := range sw.Attempts {
		fmt.Fprintf(out, "  %s\n", attempts.Line(set))
		if set.Pick == nil || set.Pick.ContainerName == "" {
			bad = append(bad, "no attempt of "+set.BranchName+" picked")
		}
		for _, a := range set.Attempts {
			losers[a.ContainerName] = set.Pick != nil && set.Pick.ContainerName != a.ContainerName
		}
	}
	for _, c := range sw.Containers {
		p := c.StoryProgress
		fmt.Fprintf(out, "  %-40s %-10s %-20s stories %d/%d completed, %d failed\n", c.ContainerName, c.Status, c.BranchName, p.Completed, p.Total, p.Failed)
		if c.Status != state.StatusCompleted && !losers[c.ContainerName] {
			bad = append(bad, c.ContainerName+" is "+string(c.Status))
		}
	}
	if *want > 0 && len(sw.Containers) != *want {
		bad = append(bad, fmt.Sprintf("%d containers, want %d", len(sw.Containers), *want))
	}
	fmt.Fprintf(out, "state file %s: swarm %s, %d containers; valid against spec/swarm-state.schema.json\n", path, sw.SwarmID, len(sw.Containers))
	if len(bad) > 0 {
		return fmt.Errorf("not every container completed: %v", bad)
	}
	return nil
}
