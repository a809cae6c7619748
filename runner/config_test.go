package runner

import (
	"testing"
	"time"

	"github.com/aimi-tools/swarm/contract"
)

func TestConfigFromEnv(t *testing.T) {
	cases := []struct {
		name    string
		env     map[string]string
		wantErr bool
		check   func(t *testing.T, c Config)
	}{
		{"nothing set means the demo agent with defaults", nil, false, func(t *testing.T, c Config) {
			if c.Agent != AgentDemo || c.StopGrace != DefaultStopGrace || c.Policy.String() != "allow" {
				t.Fatalf("%+v", c)
			}
		}},
		{"a command alone means acp", map[string]string{contract.EnvAgentCommand: "claude-code-acp"}, false, func(t *testing.T, c Config) {
			if c.Agent != AgentACP {
				t.Fatalf("agent %s", c.Agent)
			}
		}},
		{"grace and policy are read", map[string]string{contract.EnvStopGrace: "3s", contract.EnvPermissionPolicy: "allow-kinds:read,edit", contract.EnvAgentAuthMethod: "api-key"}, false, func(t *testing.T, c Config) {
			if c.StopGrace != 3*time.Second || c.Policy.String() != "allow-kinds:read,edit" || c.AuthMethod != "api-key" {
				t.Fatalf("%+v", c)
			}
		}},
		{"acp without a command is refused", map[string]string{contract.EnvAgent: "acp"}, true, nil},
		{"unknown backend is refused", map[string]string{contract.EnvAgent: "magic"}, true, nil},
		{"bad grace is refused", map[string]string{contract.EnvStopGrace: "soon"}, true, nil},
		{"bad policy is refused", map[string]string{contract.EnvPermissionPolicy: "sometimes"}, true, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := ConfigFromEnv(func(k string) string { return tc.env[k] })
			if (err != nil) != tc.wantErr {
				t.Fatalf("err %v", err)
			}
			if tc.check != nil {
				tc.check(t, c)
			}
		})
	}
}
