package enginelog

import (
	"context"
	"errors"
	"io"
	"time"

	"github.com/aimi-tools/swarm/internal/ctxutil"
)

// ringBuf is the doorbell's read buffer. Any byte is a ring, so it need
// not hold much: the stream's own buffer (the HTTP transport's) takes the
// engine's writes, and this only empties it. Every follow holds one while
// its container runs, hundreds at once.
const ringBuf = 1024

// doorbell is a following log stream whose bytes are discarded: it rings
// when the container writes and ends when the container stops (or the
// stream breaks). The lines themselves come from snapshots (see Lines), so
// what the engine's follow skips or repeats under a flood does not matter
// here: any byte is a ring, and the reader reads until a snapshot finds
// nothing new.
type doorbell struct {
	rings  chan struct{} // one pending ring at most
	ended  chan struct{} // closed when the stream ended
	stop   context.CancelFunc
	opened time.Time
}

func openDoorbell(ctx context.Context, open func(context.Context) (io.ReadCloser, error)) (*doorbell, error) {
	bctx, cancel := context.WithCancel(ctx)
	rc, err := open(bctx)
	if err != nil {
		cancel()
		return nil, err
	}
	b := &doorbell{rings: make(chan struct{}, 1), ended: make(chan struct{}), stop: cancel, opened: time.Now()}
	go func() {
		defer close(b.ended)
		defer rc.Close()
		buf := make([]byte, ringBuf)
		for {
			n, err := rc.Read(buf)
			if n > 0 {
				select {
				case b.rings <- struct{}{}:
				default:
				}
			}
			if err != nil {
				return
			}
		}
	}()
	return b, nil
}

func (r *lineReader) closeBell() {
	if r.bell != nil {
		r.bell.stop()
		r.bell = nil
	}
}

// waitBell waits, after a snapshot that found nothing new, for the
// doorbell (or idleRead). When none is open it opens one and reads at once:
// what was written between the last snapshot and the opening did not ring.
// When the doorbell ends, the container's state says whether the output
// ended too (the doorbell of a running container is opened again, after a
// wait that grows while it keeps ending at once: a created container's
// follow stream ends at once until it starts).
func (r *lineReader) waitBell(ctx context.Context) next {
	if r.bell == nil {
		var b *doorbell
		var err error
		r.call(func() { b, err = openDoorbell(ctx, r.ring) })
		if err == nil {
			r.bell = b
			return readAgain
		}
		if ctx.Err() != nil {
			return readStop
		}
		return r.bellEnded(ctx, err)
	}
	idle := time.NewTimer(idleRead)
	defer idle.Stop()
	select {
	case <-ctx.Done():
		return readStop
	case <-r.bell.rings:
		return readAgain
	case <-idle.C:
		return readAgain
	case <-r.bell.ended:
		if time.Since(r.bell.opened) > reopenMax {
			r.reopen = 0
		}
		r.closeBell()
		return r.bellEnded(ctx, nil)
	}
}

// bellEnded handles a doorbell that ended or could not be opened (err).
func (r *lineReader) bellEnded(ctx context.Context, err error) next {
	info, ierr := r.inspectGated(ctx)
	if n, done := r.judge(ctx, info, errors.Join(err, ierr)); done {
		return n
	}
	wait := r.backoff()
	if r.failures == 0 {
		wait = r.reopen // backoff doubled it up to pollMax
		r.reopen = min(max(2*r.reopen, PollMin), reopenMax)
	}
	if ctxutil.Sleep(ctx, wait) != nil {
		return readStop
	}
	return readAgain
}
