package gitref

import (
	"fmt"
	"strings"
)

// Pattern is the swarm spec's character set for branch names (task files,
// task-requests, the state file's JSON Schema). Every name CheckBranch
// accepts matches it; the converse does not hold (git refuses "a//b").
const Pattern = `^[a-zA-Z0-9][a-zA-Z0-9/_-]*$`

// MaxBranchBytes bounds a branch name. git itself has no limit, but it keeps
// each ref as a file (and a <name>.lock beside it while writing), and file
// names are at most 255 bytes on the usual filesystems; hosting services
// refuse longer refs too.
const MaxBranchBytes = 250

// Error is a branch name that breaks a rule; Rule says which, in words a
// user can act on.
type Error struct {
	Name string // the name as given, cut short when long
	Rule string
}

func (e *Error) Error() string {
	return fmt.Sprintf("branch name %q %s", e.Name, e.Rule)
}

// ValidBranch reports whether CheckBranch accepts name.
func ValidBranch(name string) bool { return CheckBranch(name) == nil }

// CheckBranch applies git's ref-name rules to refs/heads/<name>, the rules
// git adds for branch names, then the spec's character set and
// MaxBranchBytes. The first rule broken is reported.
func CheckBranch(name string) error {
	fail := func(rule string) error { return &Error{Name: shorten(name), Rule: rule} }
	switch {
	case name == "":
		return fail("is empty")
	case name == "HEAD":
		return fail(`is "HEAD", which git reserves for the current commit`)
	case name[0] == '-':
		return fail("starts with '-' (git would read it as an option)")
	}
	if rule := refRule("refs/heads/" + name); rule != "" {
		return fail(rule)
	}
	if len(name) > MaxBranchBytes {
		return fail(fmt.Sprintf("is %d bytes long; the limit is %d", len(name), MaxBranchBytes))
	}
	if !isAlnum(name[0]) {
		return fail("must start with a letter or a digit")
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; !isAlnum(c) && c != '/' && c != '_' && c != '-' {
			return fail(fmt.Sprintf("contains %s; use only letters, digits, '/', '_' and '-'", quoteByte(c)))
		}
	}
	return nil
}

// CheckRefFormat reports git's rule that refname breaks, as
// `git check-ref-format <refname>` (without --allow-onelevel, --normalize or
// --refspec-pattern) judges it, or nil.
func CheckRefFormat(refname string) error {
	if rule := refRule(refname); rule != "" {
		return &Error{Name: shorten(refname), Rule: rule}
	}
	return nil
}

// refRule is git's check_refname_format: "" when git accepts refname, else
// the rule broken. The order follows git's, so the rule named is the one git
// would trip on first.
func refRule(refname string) string {
	if refname == "@" {
		return `is "@", which git reads as HEAD`
	}
	components := 0
	for rest := refname; ; {
		comp, tail, more := strings.Cut(rest, "/")
		if rule := componentRule(comp); rule != "" {
			return rule
		}
		components++
		if !more {
			break
		}
		rest = tail
	}
	if strings.HasSuffix(refname, ".") {
		return "ends with '.'"
	}
	if components < 2 {
		return "has a single component (git wants at least one '/')"
	}
	return ""
}

// componentRule is git's check_refname_component for one '/'-separated part.
func componentRule(comp string) string {
	var last byte
	for i := 0; i < len(comp); i++ {
		c := comp[i]
		switch {
		case c < 0x20 || c == 0x7f:
			return "contains a control character"
		case c == ' ' || c == '~' || c == '^' || c == ':' || c == '?' || c == '*' || c == '[' || c == '\\':
			return fmt.Sprintf("contains %s, which git does not allow in ref names", quoteByte(c))
		case c == '.' && last == '.':
			return `contains ".."`
		case c == '{' && last == '@':
			return `contains "@{"`
		}
		last = c
	}
	switch {
	case comp == "":
		return "has an empty component (a leading or trailing '/', or \"//\")"
	case comp[0] == '.':
		return "has a component that starts with '.'"
	case strings.HasSuffix(comp, ".lock"):
		return `has a component that ends with ".lock"`
	}
	return ""
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

func quoteByte(c byte) string {
	if c < 0x20 || c >= 0x7f {
		return fmt.Sprintf("byte 0x%02x", c)
	}
	return fmt.Sprintf("'%c'", c)
}

// shorten keeps an error message bounded when the name is huge.
func shorten(s string) string {
	const max = 80
	if len(s) <= max {
		return s
	}
	return s[:max] + "..."
}
