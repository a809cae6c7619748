//go:build !unix

package acpmsg

import "time"

func cpuTime() time.Duration { return 0 }
