package container

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/engine"
	"github.com/docker/docker/client"
)

func validSpec() engine.Spec {
	return engine.Spec{
		Name:            "aimi-swarm1-task_a",
		Image:           "aimi-sandbox:latest",
		Labels:          map[string]string{contract.LabelSwarmID: "s1", contract.LabelTaskFile: ".aimi/tasks/a.json", contract.LabelProject: "/repo"},
		Env:             []string{"AIMI_TOKEN=s3cret-value", "EMPTY="},
		NanoCPUs:        1e9,
		MemoryBytes:     256 << 20,
		MemorySwapBytes: 256 << 20,
		PidsLimit:       256,
		Network:         "aimi-swarm1-net",
		Mounts:          []engine.Mount{{Source: "/srv/repo", Target: "/workspace", ReadOnly: true}},
		ExtraHosts:      []string{"aimi-host:host-gateway", "db:10.0.0.2"},
		User:            "1000:1000",
		WorkingDir:      "/workspace",
	}
}

func TestCreateValidatesBeforeAnyEngineCall(t *testing.T) {
	// A client for an address where nothing listens: any engine call would
	// fail with a connection error, so the spec errors below prove that no
	// call was made.
	cli, err := client.NewClientWithOpts(client.WithHost("tcp://127.0.0.1:1"), client.WithVersion("1.41"))
	if err != nil {
		t.Fatal(err)
	}
	d := newDocker(cli)
	defer d.Close()
	tests := []struct {
		name string
		edit func(*engine.Spec)
		want error
	}{
		{"invalid name", func(s *engine.Spec) { s.Name = "not-aimi" }, engine.ErrInvalidName},
		{"invalid env", func(s *engine.Spec) { s.Env = []string{"1BAD=x"} }, engine.ErrInvalidSpec},
		{"invalid mount", func(s *engine.Spec) { s.Mounts = []engine.Mount{{Source: "rel", Target: "/x"}} }, engine.ErrInvalidSpec},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := validSpec()
			tt.edit(&s)
			_, err := d.Create(context.Background(), s)
			if !errors.Is(err, tt.want) {
				t.Fatalf("Create = %v, want %v", err, tt.want)
			}
		})
	}
	if _, err := d.EnsureNetwork(context.Background(), "bad name", nil); !errors.Is(err, engine.ErrInvalidName) {
		t.Fatalf("EnsureNetwork(bad name) = %v, want ErrInvalidName", err)
	}
}

func TestEngineConfigSandboxDefaults(t *testing.T) {
	s := validSpec()
	s.ReadOnlyRootfs = true
	cfg, hc, nc := engineConfig(&s, "", "")
	if !cfg.OpenStdin || cfg.StdinOnce || cfg.Tty {
		t.Errorf("stdin config = open %v once %v tty %v, want open, not once, no tty", cfg.OpenStdin, cfg.StdinOnce, cfg.Tty)
	}
	if cfg.Labels[contract.LabelSandbox] != "true" || cfg.Labels[contract.LabelSwarmID] != "s1" {
		t.Errorf("labels = %v, want the caller's plus %s=true", cfg.Labels, contract.LabelSandbox)
	}
	if _, ok := s.Labels[contract.LabelSandbox]; ok {
		t.Errorf("engineConfig modified the caller's label map")
	}
	if !slices.Equal(hc.CapDrop, []string{"ALL"}) || !slices.Equal(hc.CapAdd, engine.KeptCapabilities()) {
		t.Errorf("caps drop %v add %v", hc.CapDrop, hc.CapAdd)
	}
	if !slices.Contains(hc.SecurityOpt, "no-new-privileges:true") {
		t.Errorf("security opts %v lack no-new-privileges", hc.SecurityOpt)
	}
	if hc.AutoRemove || hc.Privileged {
		t.Errorf("AutoRemove %v Privileged %v, want both false", hc.AutoRemove, hc.Privileged)
	}
	if hc.LogConfig.Type != "json-file" {
		t.Errorf("log driver %q, want json-file (readable through the logs endpoint)", hc.LogConfig.Type)
	}
	if hc.Resources.PidsLimit == nil || *hc.Resources.PidsLimit != 256 || hc.Resources.Memory != 256<<20 {
		t.Errorf("resources %+v", hc.Resources)
	}
	if _, ok := hc.Tmpfs["/tmp"]; !ok {
		t.Errorf("read-only rootfs without a /tmp tmpfs")
	}
	if nc == nil || nc.EndpointsConfig["aimi-swarm1-net"] == nil || string(hc.NetworkMode) != "aimi-swarm1-net" {
		t.Errorf("network config %+v mode %q", nc, hc.NetworkMode)
	}
}
