// Package atomicfile replaces files so that a reader, or a crash at any
// moment, sees either the old content or the new, never a mix or an empty
// file: the new content goes to a temp file in the same directory, which is
// fsynced, closed and renamed over the target, and then the directory is
// fsynced so the rename itself survives a crash. The temp file is removed on
// every error path. It also creates directories durably (each new entry's
// parent fsynced), which append-only files such as the journals need.
//
// It does not lock: writers that must not interleave take a lock around it
// (see internal/filelock).
package atomicfile
