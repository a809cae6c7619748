// Package cli owns the `aimi` command line: the command tree, flags, output
// formats and exit codes. It parses and prints; the work is done by the
// packages it calls (acpmsg, tasks, state) or by the daemon over its API.
package cli
