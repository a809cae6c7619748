package runner

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/aimi-tools/swarm/contract"
)

// maxSecretBytes bounds one secret file read into the environment.
const maxSecretBytes = 64 << 10

// LoadSecretEnv sets, for every name contract.EnvSecretEnv lists, the environment
// variable of that name to the content of the file of that name in dir
// (contract.SecretDir in a container), so the rest of the runner, git and the agent
// see them as if the engine had set them. Nothing listed, nothing done.
// Errors name the variable, never its value.
func LoadSecretEnv(getenv func(string) string, setenv func(string, string) error, dir string) error {
	list := getenv(contract.EnvSecretEnv)
	if list == "" {
		return nil
	}
	for _, name := range strings.Split(list, ",") {
		if !contract.ValidEnvName(name) {
			return fmt.Errorf("%s: %q is not an environment variable name", contract.EnvSecretEnv, name)
		}
		f, err := os.Open(filepath.Join(dir, name))
		if err != nil {
			return fmt.Errorf("%s: read the value of %s: %w", contract.EnvSecretEnv, name, err)
		}
		b, err := io.ReadAll(io.LimitReader(f, maxSecretBytes+1))
		f.Close()
		if err != nil {
			return fmt.Errorf("%s: read the value of %s: %w", contract.EnvSecretEnv, name, err)
		}
		if len(b) > maxSecretBytes {
			return fmt.Errorf("%s: the value of %s is over %d bytes", contract.EnvSecretEnv, name, maxSecretBytes)
		}
		if err := setenv(name, string(b)); err != nil {
			return fmt.Errorf("%s: set %s: %w", contract.EnvSecretEnv, name, err)
		}
	}
	return nil
}

// RequestInput is where the task-request comes from: the file
// contract.EnvTaskRequestFile names when set, stdin otherwise. The caller closes
// what it returns.
func RequestInput(getenv func(string) string, stdin io.Reader) (io.ReadCloser, error) {
	p := getenv(contract.EnvTaskRequestFile)
	if p == "" {
		return io.NopCloser(stdin), nil
	}
	f, err := os.Open(p)
	if err != nil {
		return nil, fmt.Errorf("%s: open the task-request: %w", contract.EnvTaskRequestFile, err)
	}
	return f, nil
}
