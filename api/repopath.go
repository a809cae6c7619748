package api

import (
	"errors"
	"fmt"
	"path/filepath"
	"unicode/utf8"
)

// CheckRepoPath is the one rule for a repository path the daemon accepts,
// both as a request names it and as it resolves (symlinks, git top level):
// absolute, clean, UTF-8, and free of control characters. The daemon keys
// swarms, container labels, the git service's mirrors and state by this
// path, and some of those stores do not keep every byte: git prints paths
// followed by a newline that readers trim, and the engine's labels are JSON
// strings (bytes that are not UTF-8 come back as U+FFFD). A path one of
// them changes works until a daemon restart reads it back, then matches
// nothing; so it is refused up front. The reason quotes the path (%q), so
// a newline or an escape shows as such. Callers wrap the error as a
// request error (ErrInvalidRequest, or the daemon's field error).
func CheckRepoPath(p string) error {
	switch {
	case p == "":
		return errors.New("the repository path is empty; give its absolute path")
	case !utf8.ValidString(p):
		return fmt.Errorf("the repository path %q is not UTF-8, which the daemon cannot keep intact; rename the directory", p)
	case !filepath.IsAbs(p) || filepath.Clean(p) != p:
		return fmt.Errorf("the repository path %q is not a clean absolute path", p)
	}
	for _, r := range p {
		if r < 0x20 || r == 0x7f || r >= 0x80 && r <= 0x9f {
			return fmt.Errorf("the repository path %q contains a control character (%U), which the daemon cannot keep intact; rename the directory", p, r)
		}
	}
	return nil
}
