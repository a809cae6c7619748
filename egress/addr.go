package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"
)

// inward lists the ranges a name may not resolve into: the host, its
// networks, link-local and metadata addresses, and what is no destination.
var inward = func() []netip.Prefix {
	var out []netip.Prefix
	for _, s := range []string{
		"0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16",
		"172.16.0.0/12", "192.0.0.0/24", "192.168.0.0/16", "198.18.0.0/15",
		"224.0.0.0/4", "240.0.0.0/4",
		"::/128", "::1/128", "64:ff9b::/96", "fc00::/7", "fe80::/10", "ff00::/8",
	} {
		out = append(out, netip.MustParsePrefix(s))
	}
	return out
}()

// Resolver looks names up (net.Resolver satisfies it).
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// errInward is a name resolving only to addresses the proxy refuses.
var errInward = errors.New("resolves to a loopback, private, link-local or host address")

// target resolves q.Host for rule and returns the addresses the proxy may
// dial: a rule naming an address yields that address whatever it is; a
// name yields its addresses outside the inward ranges and the host's own.
func target(ctx context.Context, res Resolver, own func() []netip.Addr, rule Rule, host string) ([]netip.Addr, error) {
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
	mine := own()
	var out []netip.Addr
	for _, a := range addrs {
		a = a.Unmap()
		if outward(a, mine) {
			out = append(out, a)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s %w", host, errInward)
	}
	return out, nil
}

// outward reports whether a is an address on the outside: not in an
// inward range and not one of the host's own.
func outward(a netip.Addr, mine []netip.Addr) bool {
	if !a.IsValid() || a.Zone() != "" {
		return false
	}
	for _, p := range inward {
		if p.Contains(a) {
			return false
		}
	}
	for _, m := range mine {
		if m == a {
			return false
		}
	}
	return true
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
