package orchestrator

import (
	"fmt"
	"slices"

	"github.com/aimi-tools/swarm/api"
)

// maxErrors bounds the errors the daemon keeps per container. They come
// from the container (a replayed final message is folded as harmless, so a
// container can repeat it without end) and every status answer, event
// and terminal shows them; the journal keeps them all.
const maxErrors = 20

// addError keeps e unless c already has it or has maxErrors; then it is
// only counted. Caller holds sw.mu.
func (c *ctr) addError(e api.ErrorDetail) {
	switch {
	case slices.Contains(c.errs, e):
	case len(c.errs) < maxErrors:
		c.errs = append(c.errs, e)
	default:
		c.errsOmitted++
	}
}

// errorsView is what the API shows of c's errors: the kept ones, then how
// many more there were. Caller holds sw.mu.
func (c *ctr) errorsView() []api.ErrorDetail {
	errs := slices.Clone(c.errs)
	if c.errsOmitted > 0 {
		errs = append(errs, api.ErrorDetail{Message: fmt.Sprintf("%d more errors not shown; 'aimi swarm logs' has them all", c.errsOmitted)})
	}
	return errs
}
