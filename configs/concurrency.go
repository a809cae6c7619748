package configs

import (
	"fmt"
	"strconv"
	"strings"
)

// maxConcurrent reads models.<name>.max_concurrent: a whole number from 0
// (no bound) up, the calls of the provider in flight across the daemon.
// A bad value is reported through bad and taken as 0.
func maxConcurrent(name string, m map[string]any, bad func(k, why, fix string)) int {
	v, ok := m["max_concurrent"]
	if !ok || v == nil {
		return 0
	}
	n, err := strconv.Atoi(strings.TrimSpace(fmt.Sprint(v)))
	if err != nil || n < 0 {
		bad("models."+name+".max_concurrent", fmt.Sprintf("%v is not a whole number from 0 up", v), "set the calls in flight at once across the daemon, e.g. 4 (0: no bound)")
		return 0
	}
	return n
}
