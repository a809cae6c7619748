package configs

import (
	"fmt"
	"os"
	"strings"

	"github.com/aimi-tools/swarm/contract"
	"github.com/spf13/viper"
)

// stringMap reads a map key. viper folds keys to lower case, so keys are
// upper-cased back (environment names are upper case by the spec's rule
// ^[A-Z_][A-Z0-9_]*$). With expand, values may name daemon environment
// variables as ${NAME}; an unset one drops the key with a warning.
func stringMap(v *viper.Viper, k string, sources []source, lookup func(string) (string, bool), expand bool) (map[string]string, []string, []string) {
	out := map[string]string{}
	var probs, warns []string
	raw := v.Get(k)
	if raw == nil {
		return out, nil, nil
	}
	m, ok := raw.(map[string]any)
	if !ok {
		return out, []string{fmt.Sprintf("%s: is not a map (from %s); write it as NAME: value lines", k, origin(sources, k))}, nil
	}
	for name, val := range m {
		full := k + "." + name
		up := strings.ToUpper(name)
		if !contract.ValidEnvKey(up) {
			probs = append(probs, fmt.Sprintf("%s: key %q is not an environment name (from %s); use letters, digits and _ , not starting with a digit", k, name, origin(sources, full)))
			continue
		}
		var s string
		switch tv := val.(type) {
		case string:
			s = tv
		case int, int64, float64, bool:
			s = fmt.Sprint(tv)
		default:
			// Never echo the value: it may be a secret.
			probs = append(probs, fmt.Sprintf("%s: value of %s is not a string (from %s); quote it", k, up, origin(sources, full)))
			continue
		}
		if expand {
			var missing []string
			s = os.Expand(s, func(n string) string {
				val, ok := lookup(n)
				if !ok {
					missing = append(missing, n)
				}
				return val
			})
			if len(missing) > 0 {
				warns = append(warns, fmt.Sprintf("%s: %s not set because the daemon's environment has no %s", k, up, strings.Join(missing, ", ")))
				continue
			}
		}
		out[up] = s
	}
	return out, probs, warns
}
