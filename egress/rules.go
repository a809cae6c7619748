package egress

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

// maxRuleLen bounds one egress.allow entry (it comes from a repository's
// .aimi/config.yaml too).
const maxRuleLen = 512

// maxHostLen is DNS's limit on a name.
const maxHostLen = 253

// Rule is one egress.allow entry:
//
//	[METHOD[,METHOD...] ]HOST[:PORT][/PATH-PREFIX]
//
// HOST is a DNS name (registry.npmjs.org), a wildcard for every name below
// a domain (*.githubusercontent.com: not the domain itself), or an IP
// address (10.0.0.7, [fd00::7]); only a rule naming an address allows a
// loopback, private, link-local or host address, and then only that one.
// Without PORT the rule allows 443 and 80. METHOD and PATH-PREFIX limit
// plain http:// requests, which the proxy can read; an HTTPS tunnel
// (CONNECT) is opaque to it, so only a rule without them allows one.
type Rule struct {
	Methods []string   // upper case; empty = any
	Host    string     // lower case name without the "*." of a wildcard, or an address
	Suffix  bool       // Host was "*.Host": names strictly below it
	Addr    netip.Addr // valid when Host is an IP address
	Port    int        // 0 = 443 and 80
	Path    string     // "" = any; else a prefix starting with "/"
	// Private: the user named this host (the daemon's own egress.allow,
	// the remote origin), so its name may resolve into a private range
	// (a company's server on its LAN); never into this machine, its
	// loopback, link-local addresses or the engine's networks. A
	// repository's entries stay outside private ranges.
	Private bool
	raw     string
}

// UserNamed is r for a host the user named (Private).
func (r Rule) UserNamed() Rule {
	r.Private = true
	return r
}

// String is the rule as written (normalised).
func (r Rule) String() string { return r.raw }

// ParseRules parses every entry; the first bad one is the error, naming it.
func ParseRules(entries []string) ([]Rule, error) {
	out := make([]Rule, 0, len(entries))
	for i, e := range entries {
		r, err := ParseRule(e)
		if err != nil {
			return nil, fmt.Errorf("entry %d: %w", i+1, err)
		}
		out = append(out, r)
	}
	return out, nil
}

// ParseRule parses one egress.allow entry.
func ParseRule(s string) (Rule, error) {
	s = strings.Trim(s, " ")
	if s == "" {
		return Rule{}, errors.New("empty entry")
	}
	if len(s) > maxRuleLen {
		return Rule{}, fmt.Errorf("entry longer than %d bytes", maxRuleLen)
	}
	for _, c := range s {
		if c < 0x21 && c != ' ' || c == 0x7f || c > 0x7e {
			return Rule{}, fmt.Errorf("entry %q holds a control or non-ASCII character", s)
		}
	}
	var r Rule
	if m, rest, ok := strings.Cut(s, " "); ok {
		ms, err := parseMethods(m)
		if err != nil {
			return Rule{}, fmt.Errorf("%q: %w", s, err)
		}
		r.Methods, s = ms, strings.Trim(rest, " ")
	}
	hostPort, path := s, ""
	if i := strings.IndexByte(s, '/'); i >= 0 {
		hostPort, path = s[:i], s[i:]
		if strings.ContainsAny(path, " ?#") {
			return Rule{}, fmt.Errorf("%q: the path prefix must not hold spaces, '?' or '#'", s)
		}
	}
	r.Path = path
	if err := r.parseHostPort(hostPort); err != nil {
		return Rule{}, fmt.Errorf("%q: %w", s, err)
	}
	r.raw = r.format()
	return r, nil
}

func parseMethods(m string) ([]string, error) {
	var out []string
	for _, t := range strings.Split(m, ",") {
		if t == "" || len(t) > 16 || strings.ToUpper(t) != t {
			return nil, fmt.Errorf("method %q must be an upper-case word such as GET", t)
		}
		for _, c := range t {
			if c < 'A' || c > 'Z' {
				return nil, fmt.Errorf("method %q must be an upper-case word such as GET", t)
			}
		}
		if !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	return out, nil
}

// parseHostPort reads HOST[:PORT].
func (r *Rule) parseHostPort(s string) error {
	host, port := s, ""
	switch {
	case strings.HasPrefix(s, "["):
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return errors.New("an IPv6 address needs its closing ']'")
		}
		host, port = s[1:end], s[end+1:]
		if port != "" && !strings.HasPrefix(port, ":") {
			return errors.New("only :PORT may follow an IPv6 address")
		}
		port = strings.TrimPrefix(port, ":")
		a, err := netip.ParseAddr(host)
		if err != nil || !a.Is6() || a.Zone() != "" {
			return fmt.Errorf("%q is not an IPv6 address", host)
		}
		r.Addr, r.Host = a, a.String()
	default:
		if h, p, ok := strings.Cut(s, ":"); ok {
			host, port = h, p
		}
		if err := r.parseHost(host); err != nil {
			return err
		}
	}
	if port != "" || strings.HasSuffix(s, ":") {
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 || strconv.Itoa(n) != port {
			return fmt.Errorf("port %q must be a number from 1 to 65535", port)
		}
		r.Port = n
	}
	return nil
}

func (r *Rule) parseHost(host string) error {
	if a, err := netip.ParseAddr(host); err == nil {
		if !a.Is4() {
			return fmt.Errorf("write the IPv6 address %q in brackets", host)
		}
		r.Addr, r.Host = a, a.String()
		return nil
	}
	if rest, ok := strings.CutPrefix(host, "*."); ok {
		r.Suffix, host = true, rest
	}
	host = strings.ToLower(host)
	if err := checkName(host); err != nil {
		return err
	}
	if r.Suffix && !strings.Contains(host, ".") {
		return fmt.Errorf("*.%s would allow a whole top-level domain; name a domain below it", host)
	}
	r.Host = host
	return nil
}

// checkName accepts a DNS name of letters, digits, '-' and '.' (no
// wildcard inside, no empty label, no all-digit last label: that would be
// an address written oddly).
func checkName(host string) error {
	if host == "" || len(host) > maxHostLen {
		return fmt.Errorf("host %q must be a name of 1 to %d characters", host, maxHostLen)
	}
	labels := strings.Split(strings.TrimSuffix(host, "."), ".")
	for _, l := range labels {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return fmt.Errorf("host %q: label %q must be 1 to 63 letters, digits or '-', not starting or ending with '-'", host, l)
		}
		for _, c := range l {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
				return fmt.Errorf("host %q: %q is not allowed in a name (wildcards only as a leading \"*.\")", host, c)
			}
		}
	}
	last := labels[len(labels)-1]
	if strings.Trim(last, "0123456789") == "" {
		return fmt.Errorf("host %q is neither a name nor an IPv4 address", host)
	}
	return nil
}

func (r Rule) format() string {
	var b strings.Builder
	if len(r.Methods) > 0 {
		b.WriteString(strings.Join(r.Methods, ",") + " ")
	}
	switch {
	case r.Addr.Is6():
		b.WriteString("[" + r.Host + "]")
	case r.Suffix:
		b.WriteString("*." + r.Host)
	default:
		b.WriteString(r.Host)
	}
	if r.Port != 0 {
		b.WriteString(":" + strconv.Itoa(r.Port))
	}
	b.WriteString(r.Path)
	return b.String()
}

// Request is what the proxy is asked for: Method is CONNECT for a tunnel
// (then Path is ""); Host is lower case, without a trailing dot.
type Request struct {
	Method string
	Host   string
	Port   int
	Path   string
}

// Allows reports whether r allows q.
func (r Rule) Allows(q Request) bool {
	if !r.hostMatches(q.Host) {
		return false
	}
	if r.Port == 0 && q.Port != 443 && q.Port != 80 || r.Port != 0 && q.Port != r.Port {
		return false
	}
	if q.Method == "CONNECT" {
		return len(r.Methods) == 0 && r.Path == ""
	}
	if len(r.Methods) > 0 && !slices.Contains(r.Methods, q.Method) {
		return false
	}
	return strings.HasPrefix(q.Path, r.Path)
}

func (r Rule) hostMatches(host string) bool {
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	name := strings.TrimSuffix(r.Host, ".")
	if r.Addr.IsValid() {
		a, err := netip.ParseAddr(strings.Trim(host, "[]"))
		return err == nil && a.Unmap() == r.Addr
	}
	if r.Suffix {
		return strings.HasSuffix(host, "."+name)
	}
	return host == name
}

// Match returns the first rule allowing q.
func Match(rules []Rule, q Request) (Rule, bool) {
	for _, r := range rules {
		if r.Allows(q) {
			return r, true
		}
	}
	return Rule{}, false
}
