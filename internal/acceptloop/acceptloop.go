package acceptloop

import (
	"errors"
	"net"
	"time"
)

// maxWait bounds the wait after a failed accept; the first is 5 ms and
// each one after doubles.
const maxWait = time.Second

// Run hands every connection ln accepts to handle, until ln is closed
// (net.ErrClosed). A failed accept is told to failed with the wait before
// the next try, then waited out.
func Run(ln net.Listener, failed func(err error, wait time.Duration), handle func(net.Conn)) {
	var wait time.Duration
	for {
		c, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			wait = min(max(2*wait, 5*time.Millisecond), maxWait)
			if failed != nil {
				failed(err, wait)
			}
			time.Sleep(wait)
			continue
		}
		wait = 0
		handle(c)
	}
}
