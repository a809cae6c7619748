package budget

import (
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Layers are where a repository's budgets are read from: the files of its
// configuration layers, and the reading of them.
type Layers struct {
	// Files names the files Read reads for a repository (its own
	// configuration file, the user's): a change to any of them is what
	// makes its budgets read again.
	Files func(repoPath string) []string
	// Read reads a repository's budgets from the layers as they are now.
	Read func(repoPath string) (Limits, error)
	// Fallback are the daemon's own budgets, which hold while a layer
	// does not read.
	Fallback Limits
}

// ReadLimits is Config.Limits read from l at each question (a budget
// raised in the user's or the repository's configuration file holds at
// the next resume); a layer that no longer reads keeps l.Fallback. Every
// story of every container asks, so a repository's budgets are read
// again only when one of its files changed (configStamp).
func ReadLimits(l Layers, log *slog.Logger) func(repoPath string) Limits {
	type read struct {
		stamp string
		lim   Limits
	}
	var mu sync.Mutex
	last := map[string]read{} // by repository
	return func(repoPath string) Limits {
		stamp, stable := configStamp(l.Files(repoPath), time.Now())
		mu.Lock()
		r, ok := last[repoPath]
		mu.Unlock()
		if ok && stable && r.stamp == stamp {
			return r.lim
		}
		lim, err := l.Read(repoPath)
		if err != nil {
			log.Warn("budgets: the configuration does not read now; the daemon's own budgets hold", "repo", repoPath, "err", err)
			lim = l.Fallback
		}
		mu.Lock()
		if stable && err == nil {
			last[repoPath] = read{stamp, lim}
		} else {
			delete(last, repoPath)
		}
		mu.Unlock()
		return lim
	}
}

// configStamp names what files are now (where each leads, its size, its
// time, its inode, or that it is missing). stable is false while one
// changed in the last two seconds: a write within the file system's time
// granularity could leave the same stamp on other content, so such a
// file is read every time until it is older.
func configStamp(files []string, now time.Time) (stamp string, stable bool) {
	var b strings.Builder
	stable = true
	for _, p := range files {
		for _, stat := range []func(string) (os.FileInfo, error){os.Lstat, os.Stat} {
			fi, err := stat(p)
			if err != nil {
				fmt.Fprintf(&b, "%q missing;", p)
				continue
			}
			var ino uint64
			if st, ok := fi.Sys().(*syscall.Stat_t); ok {
				ino = st.Ino
			}
			fmt.Fprintf(&b, "%q %v %d %d %d;", p, fi.Mode(), fi.Size(), fi.ModTime().UnixNano(), ino)
			if now.Sub(fi.ModTime()) < 2*time.Second {
				stable = false
			}
		}
	}
	return b.String(), stable
}
