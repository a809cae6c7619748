package land

import "context"

// Point is a step of a land between two of its writes, where a crash
// leaves something half done: the crash tests stop the daemon there.
type Point string

const (
	// PointMergeMade: a branch's merge commit exists (checked, or fixed),
	// the integration branch has not moved to it yet.
	PointMergeMade Point = "merge-made"
	// PointMergeMoved: the integration branch moved to the merge, nobody
	// recorded it yet.
	PointMergeMoved Point = "merge-moved"
	// PointAllLanded: every branch's outcome is known, the integration
	// branch is not yet in the checkout.
	PointAllLanded Point = "all-landed"
)

// Hook is called at each Point of a land with the branch's container
// ("" for PointAllLanded). nil in production: only a test sets one, to
// stop there.
type Hook func(ctx context.Context, at Point, container string)

// At calls h at p, when h is set.
func (h Hook) At(ctx context.Context, p Point, container string) {
	if h != nil {
		h(ctx, p, container)
	}
}
