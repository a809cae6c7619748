package demoagent

import (
	"os"
	"strconv"
	"strings"

	"github.com/aimi-tools/swarm/contract"
)

// attempt is the agent's attempt number (AIMI_ATTEMPT, best of N), 0
// when it runs no attempt.
func attempt() int {
	k, err := strconv.Atoi(os.Getenv(contract.EnvAttempt))
	if err != nil || k < 0 || k > 100 {
		return 0
	}
	return k
}

// attemptLines is what [demo:attempt] adds to the written file: attempt
// K writes K lines "attempt K", so attempts differ in content and size.
func (t *turn) attemptLines() string {
	k := attempt()
	if k == 0 || !strings.Contains(t.prompt, MarkerAttempt) {
		return ""
	}
	return strings.Repeat("attempt "+strconv.Itoa(k)+"\n", k)
}

// slowAttempt reports whether the prompt asks this attempt to take its
// time ([demo:slow-attempt-K]).
func (t *turn) slowAttempt() bool {
	k := attempt()
	return k > 0 && strings.Contains(t.prompt, MarkerSlowAttempt+strconv.Itoa(k)+"]")
}
