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
	return wholeNumber(name, "max_concurrent", m, bad, "set the calls in flight at once across the daemon, e.g. 4 (0: no bound)")
}

// requestsPerMinute reads models.<name>.requests_per_minute: a whole
// number from 0 (no bound) up, the calls of the provider begun in any
// minute across the daemon. A bad value is reported through bad and
// taken as 0.
func requestsPerMinute(name string, m map[string]any, bad func(k, why, fix string)) int {
	return wholeNumber(name, "requests_per_minute", m, bad, "set the calls begun per minute across the daemon, e.g. 50 (0: no bound)")
}

func wholeNumber(name, key string, m map[string]any, bad func(k, why, fix string), fix string) int {
	v, ok := m[key]
	if !ok || v == nil {
		return 0
	}
	n, err := strconv.Atoi(strings.TrimSpace(fmt.Sprint(v)))
	if err != nil || n < 0 || n > 1<<30 {
		bad("models."+name+"."+key, fmt.Sprintf("%v is not a whole number from 0 up", v), fix)
		return 0
	}
	return n
}
