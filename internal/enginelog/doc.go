// Package enginelog reads a sandbox's output from an engine that speaks the
// Docker Engine API's log format (multiplexed frames with timestamps): a
// container's logs (package container) and a Swarm mode service's
// (package swarmmode). Both backends share this reader and neither imports
// the other. It delivers every line after a logcursor.Position once, in
// snapshots of the log taken when a doorbell rings or on a poll, reassembles
// lines the json-file driver split into 16 KiB partial entries, drops the
// engine's echoed frames, and tells an optional Gate how far it got so a
// backend can hold a fast writer back to its pace (docs/output-reader.md).
package enginelog
