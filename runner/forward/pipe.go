package forward

import (
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"time"
)

// pipe is one forwarded connection: client (the sandbox's side) and up
// (the daemon's), copied both ways within the forward's Limits, so that
// a connection that stalls, or whose one side went, gives its place back.
type pipe struct {
	client, up net.Conn
	lim        Limits
	start      time.Time

	mu     sync.Mutex
	last   time.Time // the last byte either way
	spoke  bool      // the client sent a byte
	upDone bool      // the daemon's side ended
}

// copyBoth copies both ways until both ended, closing both when one
// fails or stalls past lim; spoke says the client sent bytes already.
func copyBoth(client, up net.Conn, lim Limits, spoke bool) {
	now := time.Now()
	p := &pipe{client: client, up: up, lim: lim, start: now, last: now, spoke: spoke}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		p.copy(up, client, true)
	}()
	go func() {
		defer wg.Done()
		p.copy(client, up, false)
		p.mu.Lock()
		p.upDone = true
		// Wake the client's side to take its Linger.
		_ = client.SetReadDeadline(time.Now())
		p.mu.Unlock()
	}()
	wg.Wait()
}

// deadline is when a read on the client's side (fromClient) or the
// daemon's must have returned a byte; p.mu held.
func (p *pipe) deadline(fromClient bool) time.Time {
	switch {
	case fromClient && p.upDone:
		return p.last.Add(p.lim.Linger)
	case fromClient && !p.spoke:
		return p.start.Add(p.lim.FirstByte)
	}
	return p.last.Add(p.lim.Idle)
}

func (p *pipe) touch(fromClient bool) {
	p.mu.Lock()
	p.last = time.Now()
	p.spoke = p.spoke || fromClient
	p.mu.Unlock()
}

// copy copies src to dst; at src's end it half-closes dst, on a failure
// or a stall it closes both.
func (p *pipe) copy(dst, src net.Conn, fromClient bool) {
	buf := make([]byte, 32<<10)
	for {
		p.mu.Lock()
		dl := p.deadline(fromClient)
		_ = src.SetReadDeadline(dl)
		p.mu.Unlock()
		n, err := src.Read(buf)
		if n > 0 {
			p.touch(fromClient)
			_ = dst.SetWriteDeadline(time.Now().Add(p.lim.Idle))
			if _, werr := dst.Write(buf[:n]); werr != nil {
				p.closeBoth()
				return
			}
			p.touch(fromClient)
		}
		switch {
		case err == nil:
		case errors.Is(err, os.ErrDeadlineExceeded) && p.stillDue(fromClient):
			// The other way was busy, or the deadline changed: read on.
		case errors.Is(err, io.EOF):
			closeWrite(dst)
			return
		default:
			p.closeBoth()
			return
		}
	}
}

// stillDue says whether a read on that side may still wait.
func (p *pipe) stillDue(fromClient bool) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return time.Now().Before(p.deadline(fromClient))
}

func (p *pipe) closeBoth() {
	_ = p.client.Close()
	_ = p.up.Close()
}

// closeWrite half-closes c when it can, else closes it.
func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
		return
	}
	_ = c.Close()
}
