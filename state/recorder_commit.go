package state

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Flush makes every record so far durable and saves the state reflecting
// it, and waits for that. Call it when a container exits (before removing
// it) and on shutdown.
func (r *Recorder) Flush(ctx context.Context) error {
	r.mu.Lock()
	target := r.gen
	for r.savedGen < target {
		ch, lastErr := r.savedCh, r.lastErr
		select {
		case r.kick <- struct{}{}:
		default:
		}
		r.mu.Unlock()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-r.done:
			r.mu.Lock()
			if r.savedGen < target {
				r.mu.Unlock()
				return ErrClosed
			}
			continue
		case <-ch:
		}
		r.mu.Lock()
		if r.savedGen < target && r.lastErr != nil && r.lastErr != lastErr {
			err := r.lastErr
			r.mu.Unlock()
			return err
		}
	}
	r.mu.Unlock()
	return nil
}

// Close flushes, stops the background loop and closes the journals. Later
// calls of Record, Track and UpdateContainer return ErrClosed.
func (r *Recorder) Close(ctx context.Context) error {
	r.mu.Lock()
	if !r.closed {
		now := r.now()
		for _, tc := range r.conts {
			if err := r.gapLocked(tc.j, now); err != nil {
				r.log.Warn("journal the count of lines left out", "journal", tc.j.path, "err", err)
			}
		}
		r.changedLocked(now, false)
	}
	r.mu.Unlock()
	ferr := r.Flush(ctx)
	r.mu.Lock()
	already := r.closed
	r.closed = true
	r.mu.Unlock()
	if already {
		return ferr
	}
	close(r.quit)
	<-r.done
	close(r.saverQuit)
	<-r.saverDone
	var errs []error
	errs = append(errs, ferr)
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, tc := range r.conts {
		if err := tc.j.f.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close journal %s: %w", tc.j.path, err))
		}
	}
	return errors.Join(errs...)
}

// loop runs batches when woken, retrying a failed one after RetryDelay.
func (r *Recorder) loop() {
	defer close(r.done)
	var retry <-chan time.Time
	for {
		select {
		case <-r.quit:
			return
		case <-r.kick:
		case <-retry:
		}
		if d := r.opts.BatchDelay; d > 0 {
			t := time.NewTimer(d)
			select {
			case <-r.quit:
				t.Stop()
				return
			case <-t.C:
			}
		}
		retry = nil
		if err := r.batch(); err != nil {
			r.log.Error("state batch failed; retrying", "err", err, "retry", r.opts.RetryDelay)
			retry = time.After(r.opts.RetryDelay)
		}
	}
}

// batch is one group commit: take the buffered records together with a
// snapshot of the state they produce, make the records durable, then hand
// the snapshot to the saver. The snapshot is taken in the same critical
// section as the buffers, so it never reflects a record that is not in this
// batch or an earlier, durable one. The saver writes it while the next
// batch is committed (a pipeline), so the state trails by about one batch.
func (r *Recorder) batch() error {
	r.mu.Lock()
	gen := r.gen
	var js []*journal
	for _, tc := range r.conts {
		j := tc.j
		if len(j.buf) > 0 {
			j.pending = append(j.pending, j.buf...)
			j.buf = j.buf[:0]
		}
		if len(j.pending) > 0 {
			js = append(js, j)
			j.inBatch = true
		}
	}
	r.buffered = 0
	close(r.takenCh)
	r.takenCh = make(chan struct{})
	job := &saveJob{gen: gen}
	if r.stateDirty {
		job.snap, job.since = r.swarm.Clone(), r.firstDirty
		r.stateDirty = false
		job.names = make(map[string]bool, len(r.conts))
		for n := range r.conts {
			job.names[n] = true
		}
	}
	r.mu.Unlock()

	// The journals are fsynced in parallel: the filesystem folds concurrent
	// fsyncs into one journal commit, so eight containers cost about one
	// fsync, not eight.
	var jerr error
	if len(js) == 1 {
		jerr = js[0].commit()
	} else if len(js) > 1 {
		errs := make([]error, len(js))
		var wg sync.WaitGroup
		for i, j := range js {
			wg.Go(func() { errs[i] = j.commit() })
		}
		wg.Wait()
		jerr = errors.Join(errs...)
	}

	r.mu.Lock()
	defer r.mu.Unlock()
	for _, j := range js {
		j.inBatch = false
	}
	if jerr != nil {
		r.redirtyLocked(job)
		r.lastErr = jerr
		r.notifyLocked()
		return jerr
	}
	r.stats.Batches++
	r.stats.JournalSyncs += uint64(len(js))
	if old := r.job; old != nil { // not taken by the saver yet: coalesce
		if job.snap == nil {
			job.snap, job.names = old.snap, old.names
		}
		if old.snap != nil && old.since.Before(job.since) || job.since.IsZero() {
			job.since = old.since
		}
	}
	r.job = job
	select {
	case r.saveKick <- struct{}{}:
	default:
	}
	return nil
}

// saveJob is a snapshot whose records are durable, waiting to be saved;
// gen is the change count it covers.
type saveJob struct {
	snap  *Swarm // nil when the batch changed no state
	names map[string]bool
	since time.Time
	gen   uint64
}

// redirtyLocked makes the next batch snapshot again after a job failed.
func (r *Recorder) redirtyLocked(job *saveJob) {
	if job.snap == nil {
		return
	}
	if !r.stateDirty || job.since.Before(r.firstDirty) {
		r.firstDirty = job.since
	}
	r.stateDirty = true
}

// notifyLocked wakes Flush waiters.
func (r *Recorder) notifyLocked() {
	close(r.savedCh)
	r.savedCh = make(chan struct{})
}

// saver writes the latest durable snapshot; it runs until saverQuit, then
// finishes a job still waiting.
func (r *Recorder) saver() {
	defer close(r.saverDone)
	for {
		quitting := false
		select {
		case <-r.saveKick:
		case <-r.saverQuit:
			quitting = true
		}
		r.mu.Lock()
		job := r.job
		r.job = nil
		r.mu.Unlock()
		if job != nil {
			r.runSave(job)
		}
		if quitting {
			return
		}
	}
}

func (r *Recorder) runSave(job *saveJob) {
	var err error
	if job.snap != nil {
		err = r.save(job.snap, job.names)
	}
	done := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		r.redirtyLocked(job)
		r.lastErr = err
		r.notifyLocked()
		r.log.Error("state save failed; retrying", "err", err, "retry", r.opts.RetryDelay)
		time.AfterFunc(r.opts.RetryDelay, func() {
			select {
			case r.kick <- struct{}{}:
			default:
			}
		})
		return
	}
	if job.gen > r.savedGen {
		r.savedGen = job.gen
	}
	r.lastErr = nil
	if job.snap != nil {
		r.stats.StateSaves++
		lag := done.Sub(job.since)
		r.stats.SumStateLag += lag
		r.stats.MaxStateLag = max(r.stats.MaxStateLag, lag)
		if r.opts.OnSave != nil {
			r.opts.OnSave(lag)
		}
	}
	r.notifyLocked()
}

// save merges the snapshot into the file under the lock: entries of the
// tracked containers are replaced (or appended), other entries, as other
// tools wrote them, are kept. With no file, or a corrupt one (moved aside by
// the load), the whole snapshot is written; a file of another swarm is
// replaced, with a warning.
func (r *Recorder) save(snap *Swarm, tracked map[string]bool) error {
	ctx := context.Background() // a save in flight is finished, not abandoned
	err := r.store.update(ctx, func(cur *Swarm) (*Swarm, error) {
		if cur == nil {
			return snap, nil
		}
		if cur.SwarmID != snap.SwarmID {
			r.log.Warn("state file holds another swarm; replacing it", "file", r.store.Path(), "other", cur.SwarmID)
			return snap, nil
		}
		if snap.UpdatedAt.After(cur.UpdatedAt) {
			cur.UpdatedAt = snap.UpdatedAt
		}
		for _, c := range snap.Containers {
			if !tracked[c.ContainerName] {
				continue
			}
			replaced := false
			for i, old := range cur.Containers {
				if old.ContainerName == c.ContainerName {
					cur.Containers[i], replaced = mergeEntry(c, old, r.written[c.ContainerName]), true
					break
				}
			}
			if !replaced {
				cur.Containers = append(cur.Containers, c)
			}
		}
		return cur, nil
	}, func(cerr *CorruptError) {
		r.log.Warn("state file was corrupt; moved aside and rewritten", "file", cerr.Path, "movedTo", cerr.MovedTo, "err", cerr.Err)
	})
	if err == nil {
		r.noteWritten(snap, tracked)
	}
	return err
}
