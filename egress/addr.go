package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"time"
)

// reach is where an address is, seen from the proxy.
type reach int

const (
	// outside: a destination anywhere beyond this machine.
	outside reach = iota
	// private: a private range (a company's LAN); reached only for a name
	// the user named (Rule.Private).
	private
	// inward: this machine, its loopback, link-local and metadata
	// addresses, the engine's networks, what is no destination. Never
	// reached through a name.
	inward
)

// ranges is the one definition of what a name may resolve into. An IPv6
// address that embeds an IPv4 one is judged by the embedded address too
// (embedded), so ::127.0.0.1 or 2002:7f00:1:: is the loopback.
var ranges = func() map[reach][]netip.Prefix {
	p := func(ss ...string) []netip.Prefix {
		var out []netip.Prefix
		for _, s := range ss {
			out = append(out, netip.MustParsePrefix(s))
		}
		return out
	}
	return map[reach][]netip.Prefix{
		inward: p("0.0.0.0/8", "127.0.0.0/8", "169.254.0.0/16", "192.0.0.0/24", "224.0.0.0/4", "240.0.0.0/4",
			"::/128", "::1/128", "fe80::/10", "fec0::/10", "ff00::/8",
			// NAT64 for local use may embed at any offset (RFC 8215); no
			// address of it is judged by one embedded address.
			"64:ff9b:1::/48"),
		private: p("10.0.0.0/8", "100.64.0.0/10", "172.16.0.0/12", "192.168.0.0/16", "198.18.0.0/15", "fc00::/7"),
	}
}()

// Forms of IPv6 that carry an IPv4 address, and where.
var (
	compat  = netip.MustParsePrefix("::/96")           // IPv4-compatible, ::a.b.c.d
	siit    = netip.MustParsePrefix("::ffff:0:0:0/96") // IPv4-translated, ::ffff:0:a.b.c.d
	nat64   = netip.MustParsePrefix("64:ff9b::/96")    // NAT64's well-known prefix
	sixTo4  = netip.MustParsePrefix("2002::/16")       // 6to4: 2002:AABB:CCDD::
	teredo  = netip.MustParsePrefix("2001::/32")       // Teredo: server, then the client inverted
	mapped4 = netip.MustParsePrefix("::ffff:0:0/96")   // IPv4-mapped
)

// embedded lists the IPv4 addresses an IPv6 address carries.
func embedded(a netip.Addr) []netip.Addr {
	if !a.Is6() {
		return nil
	}
	b := a.As16()
	v4 := func(i int, invert bool) netip.Addr {
		var x [4]byte
		copy(x[:], b[i:i+4])
		if invert {
			for j := range x {
				x[j] ^= 0xff
			}
		}
		return netip.AddrFrom4(x)
	}
	switch {
	case mapped4.Contains(a), siit.Contains(a), nat64.Contains(a), compat.Contains(a):
		return []netip.Addr{v4(12, false)}
	case sixTo4.Contains(a):
		return []netip.Addr{v4(2, false)}
	case teredo.Contains(a):
		return []netip.Addr{v4(4, false), v4(12, true)}
	}
	return nil
}

// reachOf is where a is: the farthest inward of it and what it embeds;
// the host's own addresses (mine) and networks (nets) are inward.
func reachOf(a netip.Addr, mine []netip.Addr, nets []netip.Prefix) reach {
	if !a.IsValid() || a.Zone() != "" {
		return inward
	}
	a = a.Unmap()
	r := outside
	for _, x := range append([]netip.Addr{a}, embedded(a)...) {
		r = max(r, reachOfOne(x, mine, nets))
	}
	return r
}

func reachOfOne(a netip.Addr, mine []netip.Addr, nets []netip.Prefix) reach {
	for _, m := range mine {
		if m.Unmap() == a {
			return inward
		}
	}
	for _, p := range nets {
		if p.Contains(a) {
			return inward
		}
	}
	for _, r := range []reach{inward, private} {
		for _, p := range ranges[r] {
			if p.Contains(a) {
				return r
			}
		}
	}
	return outside
}

// Resolver looks names up (net.Resolver satisfies it).
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// errInward is a name resolving only to addresses the proxy refuses.
var errInward = errors.New("resolves to a loopback, link-local, host or engine network address")

// errPrivate is a name of a rule the user did not write resolving only
// into private ranges.
var errPrivate = errors.New("resolves to a private address, which only a host named in the daemon's egress.allow or the origin may")

// local is what the proxy refuses of this machine: its addresses and its
// engine's networks.
type local struct {
	addrs func() []netip.Addr
	nets  func() []netip.Prefix
}

// target resolves host for rule and returns the addresses the proxy may
// dial: a rule naming an address yields that address whatever it is; a
// name yields its addresses outside (and private ones for a rule the user
// wrote), never this machine's.
func target(ctx context.Context, res Resolver, own local, rule Rule, host string) ([]netip.Addr, error) {
	if rule.Addr.IsValid() {
		return []netip.Addr{rule.Addr}, nil
	}
	if a, err := netip.ParseAddr(host); err == nil {
		// An address asked for is allowed only by a rule naming it.
		return nil, fmt.Errorf("%s is an address no rule names", a)
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	addrs, err := res.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return nil, fmt.Errorf("resolve %s: %w", host, err)
	}
	mine, nets := own.addrs(), own.nets()
	var out []netip.Addr
	sawPrivate := false
	for _, a := range addrs {
		switch reachOf(a, mine, nets) {
		case outside:
			out = append(out, a.Unmap())
		case private:
			sawPrivate = true
			if rule.Private {
				out = append(out, a.Unmap())
			}
		}
	}
	switch {
	case len(out) > 0:
		return out, nil
	case sawPrivate:
		return nil, fmt.Errorf("%s %w", host, errPrivate)
	}
	return nil, fmt.Errorf("%s %w", host, errInward)
}

// hostAddrs lists the host's own interface addresses.
func hostAddrs() []netip.Addr {
	ifs, err := net.InterfaceAddrs()
	if err != nil {
		return nil
	}
	var out []netip.Addr
	for _, a := range ifs {
		if p, err := netip.ParsePrefix(a.String()); err == nil {
			out = append(out, p.Addr().Unmap())
		}
	}
	return out
}

// engineNets lists the networks of the host's bridges: on one engine every
// network of the engine is a bridge of the host (docker0, br-...,
// docker_gwbridge), and an address in one is a container's or the host's.
func engineNets() []netip.Prefix {
	ifs, err := net.Interfaces()
	if err != nil {
		return nil
	}
	var out []netip.Prefix
	for _, i := range ifs {
		if _, err := os.Stat(filepath.Join("/sys/class/net", i.Name, "bridge")); err != nil {
			continue
		}
		as, err := i.Addrs()
		if err != nil {
			continue
		}
		for _, a := range as {
			if p, err := netip.ParsePrefix(a.String()); err == nil {
				out = append(out, p.Masked())
			}
		}
	}
	return out
}
