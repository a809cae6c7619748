package state

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aimi-tools/swarm/acpmsg"
	"github.com/aimi-tools/swarm/contract"
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
	// OnAppend, when set, is called with the size of every journal record
	// (for metrics). It runs under the recorder's lock: it must only count.
	OnAppend func(n int)
	// JournalCap is the size (bytes) a container's journal grows to before
	// it keeps only daemon records and lines that change the state, and
	// counts the other lines in gap records (see the package doc). Zero
	// means DefaultJournalCap; negative, no cap.
	JournalCap int64
	Logger     *slog.Logger     // default slog.Default()
	Now        func() time.Time // default time.Now
}

// Err is the error of the last state save, nil once a save succeeded: a
// failing save is retried, and this says it still fails.
func (r *Recorder) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lastErr
}

// RecorderStats are counters for benchmarks and the daemon's API.
type RecorderStats struct {
	Records      uint64        // records journaled
	Rejected     uint64        // valid messages the fold refused
	Omitted      uint64        // lines left out of a journal at its cap
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

	written map[string][]byte // saver goroutine only: each entry as last saved (merge.go)

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
	return r.store.JournalPath(contract.Sandbox{Swarm: r.swarm.SwarmID, Container: containerName})
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

// Record journals one line of a container and folds its message. rec
// carries the line's cursor, stream and the validator's verdict (Valid,
// Reason, and the raw line via SetRaw when msg is nil); msg is the parsed
// message of a valid line, or nil. Seq and Time are filled in.
//
// Every record given is journaled: dropping lines read twice is the
// reader's business (container.Lines, resumed from Position). A message the
// fold refuses is still journaled, with its reason in Rejected, and its
// *RejectedError is returned. Record returns before the record is durable; Flush waits.
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
	now := r.now()
	var rejected error
	changed := false
	if msg != nil {
		rec.Valid, rec.Reason = true, daemonNote(rec)
		rec.Type = string(msg.Type)
		if err := r.checkIdentity(tc.c, msg); err != nil {
			rejected = err
		} else if rec.Stream != StreamDaemon && IsPublishNote(*msg) {
			rejected = rejectf("%s is the daemon's own note, not a container's", acpmsg.CodePublishFailed)
		} else {
			changed, rejected = tc.t.apply(*msg)
		}
		var re *RejectedError
		if errors.As(rejected, &re) {
			rec.Rejected = re.Reason
			r.stats.Rejected++
		}
	}
	if r.omit(j, rec, changed) {
		if err := r.omitLocked(j, rec, now); err != nil {
			return fmt.Errorf("record %s: %w", containerName, err)
		}
		return rejected
	}
	if err := r.gapLocked(j, now); err != nil {
		return fmt.Errorf("record %s: %w", containerName, err)
	}
	if err := r.appendLocked(j, rec, now); err != nil {
		return fmt.Errorf("record %s: %w", containerName, err)
	}
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

// appendLocked gives rec the journal's next seq and buffers it for the
// next batch.
func (r *Recorder) appendLocked(j *journal, rec Record, now time.Time) error {
	rec.Seq = j.pos.Seq + 1
	if rec.Time.IsZero() {
		rec.Time = now
	}
	rec.Time = rec.Time.UTC()
	line, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("encode record: %w", err)
	}
	j.pos.advance(rec)
	j.buf = append(append(j.buf, line...), '\n')
	j.cap.bytes += int64(len(line)) + 1
	r.buffered += len(line) + 1
	r.stats.Records++
	if r.opts.OnAppend != nil {
		r.opts.OnAppend(len(line) + 1)
	}
	return nil
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
		if tc.j.cap.omitted.Lines > 0 {
			// The count of lines left out goes in before the journal
			// closes; the next Flush makes it durable.
			err := r.gapLocked(tc.j, r.now())
			r.changedLocked(r.now(), false)
			r.mu.Unlock()
			if err != nil {
				return fmt.Errorf("untrack %s: %w", name, err)
			}
			continue
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

// Container returns a copy of the named entry as folded so far, or nil.
// It copies that entry alone: callers asking about one container (its
// status, once per container of a swarm) would otherwise copy the whole
// swarm each time.
func (r *Recorder) Container(name string) *Container {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.swarm.Container(name).Clone()
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

// daemonNote is the reason a record of a message keeps: the daemon's own
// note on what it sent (a warm claim); a container's message has none.
func daemonNote(rec Record) string {
	if rec.Stream != StreamDaemon {
		return ""
	}
	return rec.Reason
}
