// Package safefile reads files that come from a repository or a user and so
// cannot be trusted to be files: it reads regular files only, up to a size
// cap, never blocks on a FIFO or a device, and (ReadIn) never follows a link
// out of a given root. Task files and the per-repository config use it.
package safefile
