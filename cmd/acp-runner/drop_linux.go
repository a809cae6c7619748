package main

import (
	"errors"
	"fmt"
	"os"
	"os/user"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// dropPrivileges makes the whole process the user runAs names (a name or
// uid[:gid], as in an image's USER) when it runs as root: the engine
// started it as root only so that the secret files, root's and mode 0400,
// could be read first. Afterwards nothing it starts can read them, nor
// regain root through a set-user-id program (no_new_privs). HOME becomes
// the user's home. An empty runAs, or a process not root, changes nothing.
func dropPrivileges(runAs string) error {
	if runAs == "" || os.Geteuid() != 0 {
		return nil
	}
	uid, gid, groups, home, err := lookupRunAs(runAs)
	if err != nil {
		return err
	}
	if uid == 0 {
		return nil // root asked for: nothing to drop
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("set no_new_privs: %w", err)
	}
	// The syscall package changes every thread of the process.
	if err := syscall.Setgroups(groups); err != nil {
		return fmt.Errorf("set the groups of %s: %w", runAs, err)
	}
	if err := syscall.Setresgid(gid, gid, gid); err != nil {
		return fmt.Errorf("become group %d: %w", gid, err)
	}
	if err := syscall.Setresuid(uid, uid, uid); err != nil {
		return fmt.Errorf("become user %d: %w", uid, err)
	}
	if os.Getuid() != uid || os.Geteuid() != uid || syscall.Setuid(0) == nil {
		return errors.New("the process is still root after dropping to " + runAs)
	}
	if home != "" {
		return os.Setenv("HOME", home)
	}
	return nil
}

// lookupRunAs resolves runAs the way the engine resolves an image's USER:
// names through the image's /etc/passwd and /etc/group; a uid missing
// from /etc/passwd gets group 0 and no home.
func lookupRunAs(runAs string) (uid, gid int, groups []int, home string, err error) {
	name, group, hasGroup := strings.Cut(runAs, ":")
	var u *user.User
	if n, aerr := strconv.Atoi(name); aerr == nil {
		uid = n
		u, _ = user.LookupId(name)
	} else {
		if u, err = user.Lookup(name); err != nil {
			return 0, 0, nil, "", fmt.Errorf("run as: user %q: %w", name, err)
		}
		uid, _ = strconv.Atoi(u.Uid)
	}
	if u != nil {
		gid, _ = strconv.Atoi(u.Gid)
		home = u.HomeDir
		if ids, gerr := u.GroupIds(); gerr == nil {
			for _, g := range ids {
				if n, err := strconv.Atoi(g); err == nil {
					groups = append(groups, n)
				}
			}
		}
	}
	if hasGroup {
		if n, aerr := strconv.Atoi(group); aerr == nil {
			gid = n
		} else {
			g, lerr := user.LookupGroup(group)
			if lerr != nil {
				return 0, 0, nil, "", fmt.Errorf("run as: group %q: %w", group, lerr)
			}
			gid, _ = strconv.Atoi(g.Gid)
		}
	}
	if len(groups) == 0 {
		groups = []int{gid}
	}
	return uid, gid, groups, home, nil
}
