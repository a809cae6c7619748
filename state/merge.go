package state

import "encoding/json"

// Sharing the file with the aimi shell tools: which fields of an entry the
// Recorder owns, and when (docs/state-file.md).
//
//   - An entry the Recorder has not changed since its own last write of it
//     is left exactly as the file has it: whatever another tool edited
//     there (a prUrl set with swarm-update on a completed container, a
//     status) stands.
//   - An entry it changed gets its fields written, except prUrl when the
//     Recorder has none: it writes prUrl only when it learned one (a
//     completion carrying it, the pull request the daemon opened).
//   - A container another tool marked stopped while the Recorder still has
//     it pending or running is a stop request (the orchestrator watches the
//     file and stops it): the file keeps stopped until the fold reaches a
//     terminal status of its own.
//
// Entries of containers the Recorder does not track are never touched.

// mergeEntry is what a save writes for a tracked container: mine is the
// Recorder's entry, theirs the file's (nil when the file lacks it), and
// lastWritten the JSON of mine as this Recorder last saved it (nil before
// its first save).
func mergeEntry(mine, theirs *Container, lastWritten []byte) *Container {
	if theirs == nil {
		return mine
	}
	if lastWritten != nil {
		if b, err := json.Marshal(mine); err == nil && string(b) == string(lastWritten) {
			return theirs
		}
	}
	out := mine.Clone()
	if out.PRURL == nil && theirs.PRURL != nil {
		u := *theirs.PRURL
		out.PRURL = &u
	}
	if ForeignStop(mine, theirs) {
		out.Status = StatusStopped
	}
	return out
}

// ForeignStop reports whether the file's entry says stopped while the
// daemon's own view of the container is not terminal yet: another tool
// asked for a stop.
func ForeignStop(mine, theirs *Container) bool {
	return theirs != nil && theirs.Status == StatusStopped && !mine.Status.Terminal()
}

// noteWritten remembers the tracked entries of a saved snapshot. It runs on
// the saver goroutine, the only user of r.written.
func (r *Recorder) noteWritten(snap *Swarm, tracked map[string]bool) {
	if r.written == nil {
		r.written = map[string][]byte{}
	}
	for _, c := range snap.Containers {
		if !tracked[c.ContainerName] {
			continue
		}
		if b, err := json.Marshal(c); err == nil {
			r.written[c.ContainerName] = b
		}
	}
}
