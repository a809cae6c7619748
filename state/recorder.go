package state

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aimi-tools/swarm/acpmsg"
	"github.com/aimi-tools/swarm/internal/atomicfile"
	"github.com/aimi-tools/swarm/tasks"
)

// ErrClosed is returned by a Recorder after Close.
var ErrClosed = errors.New("state recorder is closed")

// RecorderOptions tune a Recorder. The zero value is ready to use.
type RecorderOptions struct {
	// BatchDelay is how long a batch waits after its first record for more
	// to arrive before it is written. Zero (the default) writes as soon as
	// the previous batch is done: under load, records arriving during one
	// batch's fsyncs form the next batch anyway, and the state stays a
	// couple of fsyncs behind.
	BatchDelay time.Duration
	// RetryDelay is the wait before retrying a failed batch (default 200ms).
	RetryDelay time.Duration
	// OnSave, when set, is called after every state save with how long the
	// oldest change it carries waited (for lag percentiles in benchmarks and
	// metrics). It runs on the saver goroutine and must return quickly.
	OnSave func(lag time.Duration)
	Logger *slog.Logger     // default slog.Default()
	Now    func() time.Time // default time.Now
}

// RecorderStats are counters for benchmarks and the daemon's API.
type RecorderStats struct {
	Records      uint64        // records journaled
	Rejected     uint64        // valid messages the fold refused
	Batches      uint64        // group commits done
	JournalSyncs uint64        // journal fsyncs done
	StateSaves   uint64        // state file writes done
	MaxStateLag  time.Duration // longest time from a state change to the save reflecting it
	SumStateLag  time.Duration // summed over StateSaves, for a mean
}

// Recorder journals container lines, folds their messages and keeps the
// state file following, with group commit. All methods are safe for
// concurrent use.
type Recorder struct {
	store *Store
	opts  RecorderOptions
	log   *slog.Logger

	mu         sync.Mutex
	swarm      *Swarm // authoritative in memory; entries point into it
	conts      map[string]*tracked
	gen        uint64    // bumped by every change (record, track, update)
	savedGen   uint64    // gen covered by the last completed batch
	stateDirty bool      // swarm changed since the last snapshot
	firstDirty time.Time // when the oldest unsaved state change happened
	savedCh    chan struct{}
	lastErr    error
	closed     bool
	stats      RecorderStats

	buffered  int           // journal bytes not yet taken by a batch
	takenCh   chan struct{} // closed (and replaced) when a batch takes the buffers
	job       *saveJob      // durable snapshot waiting for the saver
	kick      chan struct{}
	quit      chan struct{}
	done      chan struct{}
	saveKick  chan struct{}
	saverQuit chan struct{}
	saverDone chan struct{}
}

// tracked is one container the Recorder follows.
type tracked struct {
	c *Container
	t *Tracker
	j *journal
}

// journal is one container's journal file. buf, pos and lastHash are
// guarded by Recorder.mu; f, pending and size belong to the loop.
type journal struct {
	path     string
	f        *os.File
	buf      []byte // records not yet taken by a batch
	pos      Position
	lastHash uint64 // hash of the last record's content, for replay detection
	inBatch  bool   // a batch is committing pending; the file must stay open

	pending []byte // taken by a batch, not yet durable (kept on failure)
	size    int64  // durable length of the file
}

// NewRecorder starts a recorder for sw, saving through store. sw becomes
// the Recorder's: read it back with Snapshot, change it with Track and
// UpdateContainer.
func NewRecorder(store *Store, sw *Swarm, opts RecorderOptions) *Recorder {
	if opts.RetryDelay <= 0 {
		opts.RetryDelay = 200 * time.Millisecond
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	r := &Recorder{
		store: store, opts: opts, log: log.With("swarm", sw.SwarmID),
		swarm: sw, conts: map[string]*tracked{},
		savedCh: make(chan struct{}),
		takenCh: make(chan struct{}),
		kick:    make(chan struct{}, 1),
		quit:    make(chan struct{}),
		done:    make(chan struct{}),

		saveKick:  make(chan struct{}, 1),
		saverQuit: make(chan struct{}),
		saverDone: make(chan struct{}),
	}
	go r.loop()
	go r.saver()
	return r
}

func (r *Recorder) now() time.Time { return r.opts.Now().UTC() }

// JournalPath is the journal file of a container of this swarm.
func (r *Recorder) JournalPath(containerName string) string {
	return r.store.JournalPath(r.swarm.SwarmID, containerName)
}

// Track starts following a container with its fold (NewTracker for a new
// container, RestoreTracker after a restart). c replaces the swarm's entry
// of the same name, or is appended. It opens the journal, cutting off a torn
// last line, and continues its seq. The fold's fields of c are set from t.
func (r *Recorder) Track(c *Container, t *Tracker) error {
	if c == nil || t == nil {
		return errors.New("track container: container and tracker are required")
	}
	if !containerNameRe.MatchString(c.ContainerName) {
		return fmt.Errorf("track container: name %q does not match %s", c.ContainerName, containerNameRe)
	}
	j, err := openJournal(r.JournalPath(c.ContainerName))
	if err != nil {
		return fmt.Errorf("track container %s: %w", c.ContainerName, err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		j.f.Close()
		return ErrClosed
	}
	if _, dup := r.conts[c.ContainerName]; dup {
		j.f.Close()
		return fmt.Errorf("track container: %s is already tracked", c.ContainerName)
	}
	now := r.now()
	t.CopyTo(c)
	if c.CreatedAt.IsZero() {
		c.CreatedAt = now
	}
	c.UpdatedAt = now
	replaced := false
	for i, old := range r.swarm.Containers {
		if old.ContainerName == c.ContainerName {
			r.swarm.Containers[i], replaced = c, true
			break
		}
	}
	if !replaced {
		r.swarm.Containers = append(r.swarm.Containers, c)
	}
	r.conts[c.ContainerName] = &tracked{c: c, t: t, j: j}
	r.changedLocked(now, true)
	return nil
}

// openJournal opens (creating) a journal for appending, makes its directory
// entry durable, cuts a torn last line and reads where it ends.
func openJournal(path string) (*journal, error) {
	dir := filepath.Dir(path)
	if err := atomicfile.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create journal directory: %w", err)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open journal: %w", err)
	}
	size, err := cutTornTail(f)
	if err == nil {
		err = f.Sync()
	}
	if err == nil {
		err = atomicfile.SyncDir(dir)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("open journal %s: %w", path, err)
	}
	pos, sum, err := lastRecord(path)
	if err != nil {
		f.Close()
		return nil, err
	}
	return &journal{path: path, f: f, size: size, pos: pos, lastHash: sum}, nil
}

// cutTornTail truncates the file after its last newline and returns the new
// size. A tail without a newline is a record whose append was interrupted;
// no state was saved from it (see the package doc).
func cutTornTail(f *os.File) (int64, error) {
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	size := st.Size()
	const chunk = 64 << 10
	buf := make([]byte, chunk)
	end := size
	for end > 0 {
		start := max(end-chunk, 0)
		n, err := f.ReadAt(buf[:end-start], start)
		if err != nil && err != io.EOF {
			return 0, err
		}
		if i := bytes.LastIndexByte(buf[:n], '\n'); i >= 0 {
			end = start + int64(i) + 1
			break
		}
		end = start
	}
	if end != size {
		if err := f.Truncate(end); err != nil {
			return 0, err
		}
	}
	return end, nil
}

// Record journals one line of a container and folds its message. rec
// carries the line's cursor, stream and the validator's verdict (Valid,
// Reason, and the raw line via SetRaw when msg is nil); msg is the parsed
// message of a valid line, or nil. Seq and Time are filled in.
//
// A record whose cursor is before the journal's last cursor (or equal, with
// the same content) was journaled already, by an earlier run reading the
// same logs: it is dropped and nil returned. A message the fold refuses is
// still journaled, with its reason in Rejected, and its *RejectedError is
// returned. Record returns before the record is durable; Flush waits.
func (r *Recorder) Record(ctx context.Context, containerName string, rec Record, msg *acpmsg.Message) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	switch rec.Stream {
	case StreamStdout, StreamStderr, StreamDaemon:
	default:
		return fmt.Errorf("record %s: stream %q is not %s, %s or %s", containerName, rec.Stream, StreamStdout, StreamStderr, StreamDaemon)
	}
	if msg != nil {
		b, err := encodeMessage(msg)
		if err != nil {
			return fmt.Errorf("record %s: encode message: %w", containerName, err)
		}
		rec.Message, rec.Raw, rec.RawBase64 = b, "", ""
	}
	sum := rec.contentHash()

	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return ErrClosed
	}
	tc, ok := r.conts[containerName]
	if !ok {
		return fmt.Errorf("record: container %s is not tracked (call Track first)", containerName)
	}
	j := tc.j
	// Only stdout (the protocol) is ordered against the cursor: the engine
	// logs stdout and stderr from separate goroutines, so a stderr line may
	// carry a later timestamp than a stdout line delivered after it.
	if rec.Stream == StreamStdout && rec.Cursor != "" && j.pos.Cursor != "" {
		switch cmpCursor(rec.Cursor, j.pos.Cursor) {
		case -1:
			return nil
		case 0:
			if sum == j.lastHash {
				return nil
			}
		}
	}
	now := r.now()
	var rejected error
	changed := false
	if msg != nil {
		rec.Valid, rec.Reason = true, ""
		rec.Type = string(msg.Type)
		if err := r.checkIdentity(tc.c, msg); err != nil {
			rejected = err
		} else {
			changed, rejected = tc.t.apply(*msg)
		}
		var re *RejectedError
		if errors.As(rejected, &re) {
			rec.Rejected = re.Reason
			r.stats.Rejected++
		}
	}
	j.pos.Seq++
	rec.Seq = j.pos.Seq
	if rec.Cursor != "" && rec.Stream == StreamStdout {
		j.pos.Cursor = rec.Cursor
		j.lastHash = sum
	}
	if rec.Time.IsZero() {
		rec.Time = now
	}
	rec.Time = rec.Time.UTC()
	line, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("record %s: encode record: %w", containerName, err)
	}
	j.buf = append(append(j.buf, line...), '\n')
	r.buffered += len(line) + 1
	r.stats.Records++
	if changed {
		tc.t.CopyTo(tc.c)
		tc.c.UpdatedAt = now
	}
	r.changedLocked(now, changed)
	// Backpressure: when the disk falls behind, hold the reader of this
	// container's lines instead of buffering without bound.
	for r.buffered > maxBuffered && !r.closed {
		ch := r.takenCh
		r.mu.Unlock()
		select {
		case <-ctx.Done():
			r.mu.Lock()
			return fmt.Errorf("record %s: journal buffer full, stopped waiting (the record is kept): %w", containerName, ctx.Err())
		case <-ch:
		}
		r.mu.Lock()
	}
	return rejected
}

// maxBuffered bounds the journal bytes waiting for a batch; Record blocks
// above it until the loop takes them.
const maxBuffered = 8 << 20

// checkIdentity rejects a message addressed to another swarm or container.
func (r *Recorder) checkIdentity(c *Container, m *acpmsg.Message) error {
	if m.SwarmID != "" && m.SwarmID != r.swarm.SwarmID {
		return rejectf("message is for swarm %s, not %s", m.SwarmID, r.swarm.SwarmID)
	}
	a, b := m.ContainerID, c.ContainerID
	if a != "" && b != "" && !strings.HasPrefix(a, b) && !strings.HasPrefix(b, a) {
		return rejectf("message is for container %s, not %s", a, b)
	}
	return nil
}

// cmpCursor orders two cursors as the container package writes them: the
// engine's RFC 3339 timestamp, optionally followed by "#<seq>" for the n-th
// line sharing that timestamp. Unparsable ones compare as after (1), so they
// are never dropped.
func cmpCursor(a, b string) int {
	ta, sa, ok1 := splitCursor(a)
	tb, sb, ok2 := splitCursor(b)
	if !ok1 || !ok2 {
		return 1
	}
	if c := ta.Compare(tb); c != 0 {
		return c
	}
	switch {
	case sa < sb:
		return -1
	case sa > sb:
		return 1
	}
	return 0
}

func splitCursor(c string) (time.Time, int, bool) {
	ts, seqText, hasSeq := strings.Cut(c, "#")
	t, err := time.Parse(time.RFC3339Nano, ts)
	if err != nil {
		return time.Time{}, 0, false
	}
	seq := 0
	if hasSeq {
		if seq, err = strconv.Atoi(seqText); err != nil || seq < 0 {
			return time.Time{}, 0, false
		}
	}
	return t, seq, true
}

// changedLocked notes a change for the next batch and wakes the loop.
func (r *Recorder) changedLocked(now time.Time, state bool) {
	r.gen++
	if state {
		r.swarm.UpdatedAt = now
		if !r.stateDirty {
			r.firstDirty = now
		}
		r.stateDirty = true
	}
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// UpdateContainer changes a tracked container's own fields (ContainerID,
// ACPPID, BranchName, TaskFilePath) and schedules a save. The fold's fields
// (Status, PRURL, StoryProgress) are put back from its Tracker afterwards:
// they change only through messages (the daemon journals its own, such as a
// synthesised error AGENT_CRASH, with Record and StreamDaemon).
func (r *Recorder) UpdateContainer(name string, fn func(*Container)) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return ErrClosed
	}
	tc, ok := r.conts[name]
	if !ok {
		return fmt.Errorf("update container: %s is not tracked", name)
	}
	fn(tc.c)
	tc.c.ContainerName = name
	tc.t.CopyTo(tc.c)
	now := r.now()
	tc.c.UpdatedAt = now
	r.changedLocked(now, true)
	return nil
}

// Untrack stops following a container: it flushes, closes the journal and
// drops the entry from the Recorder's swarm. The entry in the file stays as
// last saved (later saves leave untracked entries alone); remove it with
// Store.Update if it should go. Track it again, with a fresh or restored
// Tracker, to follow a rerun.
func (r *Recorder) Untrack(ctx context.Context, name string) error {
	for {
		if err := r.Flush(ctx); err != nil {
			return fmt.Errorf("untrack %s: %w", name, err)
		}
		r.mu.Lock()
		tc, ok := r.conts[name]
		if !ok {
			r.mu.Unlock()
			return fmt.Errorf("untrack: %s is not tracked", name)
		}
		// Records that arrived after the Flush (stop the container's
		// reader first) are made durable before the journal is closed.
		if len(tc.j.buf) == 0 && !tc.j.inBatch {
			delete(r.conts, name)
			r.swarm.Containers = slices.DeleteFunc(r.swarm.Containers, func(c *Container) bool { return c.ContainerName == name })
			r.mu.Unlock()
			return tc.j.f.Close()
		}
		r.mu.Unlock()
	}
}

// Snapshot returns a deep copy of the swarm as folded so far (possibly
// ahead of the file).
func (r *Recorder) Snapshot() *Swarm {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.swarm.Clone()
}

// Stories returns a copy of a tracked container's per-story status.
func (r *Recorder) Stories(name string) (map[string]tasks.Status, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	tc, ok := r.conts[name]
	if !ok {
		return nil, false
	}
	return maps.Clone(tc.t.stories), true
}

// Position returns where a tracked container's journal ends (recorded, not
// necessarily durable yet).
func (r *Recorder) Position(name string) (Position, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	tc, ok := r.conts[name]
	if !ok {
		return Position{}, false
	}
	return tc.j.pos, true
}

// Stats returns the counters so far.
func (r *Recorder) Stats() RecorderStats {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stats
}

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

// commit appends the pending records and fsyncs. On failure the file is cut
// back to its durable length and the records stay pending for a retry.
func (j *journal) commit() error {
	if _, err := j.f.Write(j.pending); err != nil {
		_ = j.f.Truncate(j.size)
		return fmt.Errorf("append journal %s: %w", j.path, err)
	}
	if err := j.f.Sync(); err != nil {
		_ = j.f.Truncate(j.size)
		return fmt.Errorf("fsync journal %s: %w", j.path, err)
	}
	j.size += int64(len(j.pending))
	j.pending = j.pending[:0]
	return nil
}

// save merges the snapshot into the file under the lock: entries of the
// tracked containers are replaced (or appended), other entries, as other
// tools wrote them, are kept. With no file, or a corrupt one (moved aside by
// the load), the whole snapshot is written; a file of another swarm is
// replaced, with a warning.
func (r *Recorder) save(snap *Swarm, tracked map[string]bool) error {
	ctx := context.Background() // a save in flight is finished, not abandoned
	return r.store.update(ctx, func(cur *Swarm) (*Swarm, error) {
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
					cur.Containers[i], replaced = c, true
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
}
