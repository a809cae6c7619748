// Package gitcmd runs the git CLI for the daemon (every git it runs goes
// through here): a command's stdout, or an error carrying git's stderr and
// exit status; or the command itself, for a caller that streams. Settings
// go in through the environment, never the command line. The runner in a
// sandbox runs its own git, with an environment of its own making.
package gitcmd
