//go:build unix

package acpmsg

import (
	"syscall"
	"time"
)

// cpuTime is the process's user+system CPU time. Benchmarks divide by it as
// well as by wall time: on a shared machine wall time says more about the
// neighbours than about the code.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
