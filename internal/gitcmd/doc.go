// Package gitcmd runs the git CLI for the daemon: a command's stdout, or
// an error carrying git's stderr and exit status. Settings go in through
// the environment, never the command line.
package gitcmd
