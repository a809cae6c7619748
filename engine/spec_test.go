package engine

import (
	"errors"
	"strings"
	"testing"

	"github.com/aimi-tools/swarm/contract"
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
		{"sealed on no network is valid", func(s *Spec) { s.Network, s.Sealed = NetworkNone, true }, nil},
		{"sealed on a network is refused", func(s *Spec) { s.Network, s.Sealed = "aimi-net", true }, ErrInvalidSpec},
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
			err := s.Validate()
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
