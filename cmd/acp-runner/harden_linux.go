package main

import "golang.org/x/sys/unix"

// harden makes the runner's /proc entries (environ with AIMI_GIT_TOKEN among
// them, mem, fds) unreadable by other processes of the same user, which is
// what the agent runs as. It does not protect git's own processes while they
// run, nor anything from root; the token is scoped to one repository anyway.
func harden() error { return unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0) }
