package container

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/aimi-tools/swarm/contract"
	"github.com/docker/docker/client"
)

func validSpec() Spec {
	return Spec{
		Name:            "aimi-swarm1-task_a",
		Image:           "aimi-sandbox:latest",
		Labels:          map[string]string{contract.LabelSwarmID: "s1", contract.LabelTaskFile: ".aimi/tasks/a.json", contract.LabelProject: "/repo"},
		Env:             []string{"AIMI_TOKEN=s3cret-value", "EMPTY="},
		NanoCPUs:        1e9,
		MemoryBytes:     256 << 20,
		MemorySwapBytes: 256 << 20,
		PidsLimit:       256,
		Network:         "aimi-swarm1-net",
		Mounts:          []Mount{{Source: "/srv/repo", Target: "/workspace", ReadOnly: true}},
		ExtraHosts:      []string{"aimi-host:host-gateway", "db:10.0.0.2"},
		User:            "1000:1000",
		WorkingDir:      "/workspace",
	}
}

func TestSpecValidate(t *testing.T) {
	tests := []struct {
		name    string
		edit    func(*Spec)
		wantErr error // nil: valid
	}{
		{"complete spec is valid", func(*Spec) {}, nil},
		{"minimal spec is valid", func(s *Spec) { *s = Spec{Name: "aimi-x", Image: "img"} }, nil},
		{"name without aimi- prefix is an invalid name", func(s *Spec) { s.Name = "task-a" }, ErrInvalidName},
		{"name with a slash is an invalid name", func(s *Spec) { s.Name = "aimi-a/b" }, ErrInvalidName},
		{"name starting with a dash after the prefix is an invalid name", func(s *Spec) { s.Name = "aimi--a" }, ErrInvalidName},
		{"empty name is an invalid name", func(s *Spec) { s.Name = "" }, ErrInvalidName},
		{"overlong name is an invalid name", func(s *Spec) { s.Name = "aimi-" + strings.Repeat("a", 200) }, ErrInvalidName},
		{"empty image is refused", func(s *Spec) { s.Image = "" }, ErrInvalidSpec},
		{"env entry without = is refused", func(s *Spec) { s.Env = []string{"NOVALUE"} }, ErrInvalidSpec},
		{"env key with a dash is refused", func(s *Spec) { s.Env = []string{"BAD-KEY=s3cret-value"} }, ErrInvalidSpec},
		{"empty label key is refused", func(s *Spec) { s.Labels = map[string]string{"": "x"} }, ErrInvalidSpec},
		{"negative memory is refused", func(s *Spec) { s.MemoryBytes = -1 }, ErrInvalidSpec},
		{"swap below memory is refused", func(s *Spec) { s.MemorySwapBytes = 1 << 20 }, ErrInvalidSpec},
		{"swap without memory is refused", func(s *Spec) { s.MemoryBytes = 0 }, ErrInvalidSpec},
		{"unlimited swap is valid", func(s *Spec) { s.MemorySwapBytes = -1 }, nil},
		{"pids below -1 is refused", func(s *Spec) { s.PidsLimit = -2 }, ErrInvalidSpec},
		{"required runtime without a name is refused", func(s *Spec) { s.RequireRuntime = true }, ErrInvalidSpec},
		{"runtime with a space is refused", func(s *Spec) { s.Runtime = "sysbox runc" }, ErrInvalidSpec},
		{"host network is refused", func(s *Spec) { s.Network = "host" }, ErrInvalidSpec},
		{"relative mount source is refused", func(s *Spec) { s.Mounts = []Mount{{Source: "repo", Target: "/w"}} }, ErrInvalidSpec},
		{"mount target with .. is refused", func(s *Spec) { s.Mounts = []Mount{{Source: "/r", Target: "/w/../etc"}} }, ErrInvalidSpec},
		{"mount over / is refused", func(s *Spec) { s.Mounts = []Mount{{Source: "/r", Target: "/"}} }, ErrInvalidSpec},
		{"extra host without address is refused", func(s *Spec) { s.ExtraHosts = []string{"aimi-host"} }, ErrInvalidSpec},
		{"extra host with a bad address is refused", func(s *Spec) { s.ExtraHosts = []string{"h:not-an-ip"} }, ErrInvalidSpec},
		{"relative working dir is refused", func(s *Spec) { s.WorkingDir = "work" }, ErrInvalidSpec},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := validSpec()
			tt.edit(&s)
			err := s.validate()
			if tt.wantErr == nil {
				if err != nil {
					t.Fatalf("validate: %v", err)
				}
				return
			}
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("validate = %v, want %v", err, tt.wantErr)
			}
			if strings.Contains(err.Error(), "s3cret-value") {
				t.Fatalf("error leaks an env value: %v", err)
			}
		})
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
		edit func(*Spec)
		want error
	}{
		{"invalid name", func(s *Spec) { s.Name = "not-aimi" }, ErrInvalidName},
		{"invalid env", func(s *Spec) { s.Env = []string{"1BAD=x"} }, ErrInvalidSpec},
		{"invalid mount", func(s *Spec) { s.Mounts = []Mount{{Source: "rel", Target: "/x"}} }, ErrInvalidSpec},
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
	if _, err := d.EnsureNetwork(context.Background(), "bad name", nil); !errors.Is(err, ErrInvalidName) {
		t.Fatalf("EnsureNetwork(bad name) = %v, want ErrInvalidName", err)
	}
}

func TestEngineConfigSandboxDefaults(t *testing.T) {
	s := validSpec()
	s.ReadOnlyRootfs = true
	cfg, hc, nc := s.engineConfig("")
	if !cfg.OpenStdin || cfg.StdinOnce || cfg.Tty {
		t.Errorf("stdin config = open %v once %v tty %v, want open, not once, no tty", cfg.OpenStdin, cfg.StdinOnce, cfg.Tty)
	}
	if cfg.Labels[contract.LabelSandbox] != "true" || cfg.Labels[contract.LabelSwarmID] != "s1" {
		t.Errorf("labels = %v, want the caller's plus %s=true", cfg.Labels, contract.LabelSandbox)
	}
	if _, ok := s.Labels[contract.LabelSandbox]; ok {
		t.Errorf("engineConfig modified the caller's label map")
	}
	if !slices.Equal(hc.CapDrop, []string{"ALL"}) || !slices.Equal(hc.CapAdd, KeptCapabilities()) {
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
