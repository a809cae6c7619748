package gitserve

import (
	"context"
	"fmt"
	"strings"

	"github.com/aimi-tools/swarm/gitref"
)

// DeltaSize is how far the default branch's tip moved from a commit (a
// workspace image's): what a sandbox of that image would be sent.
type DeltaSize struct {
	Tip string
	// Descends is false when the tip does not descend from the commit (a
	// history rewritten, or the commit unknown to the mirror).
	Descends bool
	// Paths the tip changed, added or deleted; Bytes the size of the
	// changed and added files at the tip.
	Paths int
	Bytes int64
}

// DefaultDeltaSize measures the difference from base to the tip of
// swarmID's default branch with the same listing the difference sent to
// runners is made of (treeDiff). An error (more than maxDeltaPaths paths,
// a submodule's change, git) means it could not be measured: treat the
// difference as large.
func (s *Service) DefaultDeltaSize(ctx context.Context, swarmID, base string) (DeltaSize, error) {
	tip, _, err := s.branchTip(ctx, swarmID, "")
	if err != nil {
		return DeltaSize{}, err
	}
	d := DeltaSize{Tip: tip}
	if tip == base {
		d.Descends = true
		return d, nil
	}
	if !gitref.ValidOID(base) {
		return DeltaSize{}, fmt.Errorf("%w: %q is not a commit id", errNoDelta, base)
	}
	mirror := s.mirrorPath(swarmID)
	if ok, err := mirrorGit.IsAncestor(ctx, mirror, base, tip); err != nil || !ok {
		return d, nil
	}
	d.Descends = true
	_, changed, deleted, err := treeDiff(ctx, mirror, base, tip)
	if err != nil {
		return DeltaSize{}, err
	}
	d.Paths = len(changed) + len(deleted)
	if d.Bytes, err = blobSizes(ctx, mirror, tip, changed); err != nil {
		return DeltaSize{}, err
	}
	return d, nil
}

// blobSizes sums the sizes of paths (files and links) at tip.
func blobSizes(ctx context.Context, mirror, tip string, paths []string) (int64, error) {
	if len(paths) == 0 {
		return 0, nil
	}
	args := []string{"ls-tree", "-r", "-l", "-z", tip, "--"}
	for _, p := range paths {
		args = append(args, ":(literal)"+p)
	}
	out, err := mirrorGit.Run(ctx, mirror, args...)
	if err != nil {
		return 0, fmt.Errorf("measure a difference: %w", err)
	}
	var total int64
	for _, line := range strings.Split(strings.TrimSuffix(out, "\x00"), "\x00") {
		if e, ok := parseTreeEntry([]byte(line)); ok && e.size > 0 {
			total += e.size // -1 for a submodule: treeDiff refused those
		}
	}
	return total, nil
}
