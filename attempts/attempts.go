package attempts

import (
	"fmt"
	"strconv"
	"strings"
)

// Bounds of swarm.attempts and --attempts.
const (
	Min = 1
	Max = 16
)

// Stop policies (swarm.attempts_stop).
const (
	// StopAll runs every attempt to its end.
	StopAll = "all"
	// StopFirstVerified stops a task file's other attempts once one
	// qualifies (their commits are kept).
	StopFirstVerified = "first-verified"
)

// ValidStop reports whether s is a stop policy ("" is StopAll's default).
func ValidStop(s string) bool { return s == "" || s == StopAll || s == StopFirstVerified }

// CheckCount is nil for a number of attempts in [Min, Max]; 0 means the
// configured default and is accepted too.
func CheckCount(n int) error {
	if n != 0 && (n < Min || n > Max) {
		return fmt.Errorf("%d attempts: use %d to %d (1 runs each task file once)", n, Min, Max)
	}
	return nil
}

// nameSuffix and branchSuffix separate an attempt's number from its task
// file's container name and branch.
const (
	nameSuffix   = "-a"
	branchSuffix = "--a"
)

// Name is attempt k's container name: <container>-a<k>.
func Name(container string, k int) string { return container + nameSuffix + strconv.Itoa(k) }

// Branch is attempt k's branch: <branch>--a<k>.
func Branch(branch string, k int) string { return branch + branchSuffix + strconv.Itoa(k) }

// BaseBranch is the task file's branch of an attempt's branch, and the
// attempt's number; ok is false for a branch Branch did not make.
func BaseBranch(b string) (base string, k int, ok bool) {
	i := strings.LastIndex(b, branchSuffix)
	if i <= 0 {
		return "", 0, false
	}
	k, err := strconv.Atoi(b[i+len(branchSuffix):])
	if err != nil || k < Min || k > Max || strconv.Itoa(k) != b[i+len(branchSuffix):] {
		return "", 0, false
	}
	return b[:i], k, true
}

// VariantIndex is the index of the variant attempt k (1-based) runs when
// there are n variants: the attempts go round them in order, attempt 1
// on the first. -1 without variants.
func VariantIndex(k, n int) int {
	if n <= 0 || k < 1 {
		return -1
	}
	return (k - 1) % n
}
