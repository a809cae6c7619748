// Package logcursor is the position in a container's output: the engine's
// timestamp of a line plus its index among the lines of the same stream
// sharing that timestamp. The container package reads output after a
// position; the state package journals each line's cursor and the position
// a journal ends at. Both parse and order cursors only through this
// package, so a journal the daemon wrote is always one it can resume from.
//
// A cursor is stored as "<RFC 3339 time>#<seq>" (String). Parse also takes a
// bare RFC 3339 time, meaning seq 0: journals of earlier versions have such
// cursors, and the daemon must resume from them.
package logcursor
