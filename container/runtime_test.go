package container

import (
	"strings"
	"testing"
)

// gVisor's registrations: what runs sandboxes with sockets (no network),
// what runs them on a bridge network, and what fails either way.
func TestGVisorProblem(t *testing.T) {
	cases := []struct {
		args    []string
		sockets bool
		want    string // "" or a word of the problem
	}{
		{[]string{"--network=host", "--host-uds=open"}, true, ""},
		{[]string{"--network", "host", "--host-uds", "all"}, true, ""},
		{[]string{"-network=none", "-host-uds=open"}, true, ""},
		{[]string{"--network=host", "--fsgofer-host-uds"}, true, ""},
		{[]string{"--network=host"}, true, "--host-uds=open"},
		{[]string{"--network=host", "--host-uds=create"}, true, "--host-uds=open"},
		{[]string{"--network=host", "--fsgofer-host-uds=false"}, true, "--host-uds=open"},
		{nil, true, "network mode sandbox"},
		{[]string{"--host-uds=open"}, true, "network mode sandbox"},
		{[]string{"--network=sandbox", "--host-uds=open"}, true, "network mode sandbox"},
		{[]string{"--network=host"}, false, ""},
		{[]string{"--network=none", "--host-uds=open"}, false, "need --network=host"},
		{nil, false, "need --network=host"},
	}
	for _, c := range cases {
		got := gvisorProblem(c.args, c.sockets)
		if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("gvisorProblem(%q, sockets=%v) = %q, want %q", c.args, c.sockets, got, c.want)
		}
	}
}

func TestIsGVisor(t *testing.T) {
	for _, c := range []struct {
		name, path string
		want       bool
	}{
		{"runsc", "/usr/bin/runsc", true},
		{"gvisor", "/usr/local/bin/runsc", true},
		{"runsc-kvm", "", true},
		{"sysbox-runc", "/usr/bin/sysbox-runc", false},
		{"runc", "runc", false},
	} {
		if got := isGVisor(c.name, c.path); got != c.want {
			t.Errorf("isGVisor(%q, %q) = %v, want %v", c.name, c.path, got, c.want)
		}
	}
}
