package configs

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	units "github.com/docker/go-units"
	"github.com/spf13/viper"
)

// reader reads typed values from the merged layers and collects one problem
// per value that does not parse, naming the layer it came from and the fix.
type reader struct {
	v       *viper.Viper
	sources []source
	probs   []string
}

// bad records that key k's value val is wrong (why) and what to do (fix).
func (r *reader) bad(k, val, why, fix string) {
	r.probs = append(r.probs, fmt.Sprintf("%s: %q %s (from %s); %s", k, val, why, origin(r.sources, k), fix))
}

// str is key k's value with surrounding space removed.
func (r *reader) str(k string) string { return strings.TrimSpace(r.v.GetString(k)) }

// size is key k as a byte size; 0 for empty when allowEmpty, -1 for "-1" when
// allowUnlimited.
func (r *reader) size(k string, allowEmpty, allowUnlimited bool) int64 {
	s := r.str(k)
	if s == "" && allowEmpty {
		return 0
	}
	if s == "-1" && allowUnlimited {
		return -1
	}
	n, err := units.RAMInBytes(s)
	if err != nil || n <= 0 {
		r.bad(k, s, "is not a size", "use a number with k, m or g, e.g. 4g")
		return 0
	}
	return n
}

func (r *reader) boolean(k string) bool {
	s := r.str(k)
	b, err := strconv.ParseBool(s)
	if err != nil {
		r.bad(k, s, "is not a boolean", "use true or false")
	}
	return b
}

// duration is key k as a positive duration.
func (r *reader) duration(k string) time.Duration {
	s := r.str(k)
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		r.bad(k, s, "is not a positive duration", "use a number with s, m or h, e.g. 30s or 2h")
		return 0
	}
	return d
}

// integer is key k as a whole number from lo to hi.
func (r *reader) integer(k string, lo, hi int64) int64 {
	s := r.str(k)
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < lo || n > hi {
		r.bad(k, s, "is out of range or not a whole number", fmt.Sprintf("use a whole number from %d to %d", lo, hi))
		return 0
	}
	return n
}

// oneOf is key k, which must be one of allowed.
func (r *reader) oneOf(k string, allowed ...string) string {
	s := r.str(k)
	for _, a := range allowed {
		if s == a {
			return s
		}
	}
	r.bad(k, s, "is not allowed", "use one of "+strings.Join(allowed, ", "))
	return s
}
