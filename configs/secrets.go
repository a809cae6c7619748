package configs

import (
	"log/slog"
	"sort"
	"strconv"
	"strings"
)

// Secrets is a map of environment values that must never be printed: every
// formatting path (fmt, slog, JSON) shows the keys only.
type Secrets map[string]string

// String lists the keys with redacted values.
func (s Secrets) String() string {
	keys := make([]string, 0, len(s))
	for k := range s {
		keys = append(keys, k+"=<redacted>")
	}
	sort.Strings(keys)
	return "[" + strings.Join(keys, " ") + "]"
}

// GoString redacts for %#v too.
func (s Secrets) GoString() string { return s.String() }

// LogValue redacts for slog.
func (s Secrets) LogValue() slog.Value { return slog.StringValue(s.String()) }

// MarshalJSON redacts for JSON.
func (s Secrets) MarshalJSON() ([]byte, error) { return []byte(strconv.Quote(s.String())), nil }
