package contract

import "regexp"

// Name rules more than one package checks: each is written here once.
const (
	// PatternEnvKey is the name of an environment variable a task-request
	// (envVars) or the user's configuration sets: upper case letters,
	// digits and underscores, not starting with a digit.
	PatternEnvKey = `^[A-Z_][A-Z0-9_]*$`
	// PatternEnvName is any POSIX-style environment variable name, lower
	// case allowed: the runner's own variables and secret files.
	PatternEnvName = `^[A-Za-z_][A-Za-z0-9_]*$`
	// PatternRuntime is an OCI runtime name as the engine registers it
	// (runc, runsc, kata-runtime, io.containerd.runc.v2).
	PatternRuntime = `^[a-zA-Z0-9][a-zA-Z0-9_.-]*$`
)

var (
	envNameRE = regexp.MustCompile(PatternEnvName)
	runtimeRE = regexp.MustCompile(PatternRuntime)
)

// ValidEnvKey reports whether s matches PatternEnvKey. It is written out,
// not a regexp: message validation calls it for every envVars key.
func ValidEnvKey(s string) bool {
	if s == "" || !(isUpper(s[0]) || s[0] == '_') {
		return false
	}
	for i := 1; i < len(s); i++ {
		if c := s[i]; !isUpper(c) && !isDigit(c) && c != '_' {
			return false
		}
	}
	return true
}

// ValidEnvName reports whether s matches PatternEnvName.
func ValidEnvName(s string) bool { return envNameRE.MatchString(s) }

// ValidRuntime reports whether s matches PatternRuntime.
func ValidRuntime(s string) bool { return runtimeRE.MatchString(s) }

func isUpper(c byte) bool { return c >= 'A' && c <= 'Z' }
func isDigit(c byte) bool { return c >= '0' && c <= '9' }
