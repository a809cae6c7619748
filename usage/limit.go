package usage

import (
	"math"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// DefaultLimitMaxWait bounds the wait a provider's limit may ask for
// (agent.limit_max_wait): a larger or garbled reset is cut to it.
const DefaultLimitMaxWait = 6 * time.Hour

// backoffBase is the first wait when a limited answer says nothing of its
// reset; each further limit in a row doubles it (with full jitter).
const backoffBase = 2 * time.Second

// Limited reports whether an answer's status is a provider's limit: 429
// (rate or usage limit) or Anthropic's 529 (overloaded).
func Limited(status int) bool { return status == http.StatusTooManyRequests || status == 529 }

// LimitReset says until when a limited answer asks callers to wait: its
// retry-after (seconds or an HTTP date; retry-after-ms too), else the
// latest of the providers' reset headers (anthropic-ratelimit-*-reset, RFC
// 3339; x-ratelimit-reset-*, durations such as 6m0s or 20ms), else an
// exponential backoff with full jitter for the attempt-th limit in a row
// (0 first). The wait is bounded by maxWait (DefaultLimitMaxWait when 0);
// source names the header used, or "backoff".
func LimitReset(h http.Header, now time.Time, attempt int, maxWait time.Duration) (until time.Time, source string) {
	if maxWait <= 0 {
		maxWait = DefaultLimitMaxWait
	}
	wait, source := headerWait(h, now)
	if source == "" {
		exp := backoffBase << min(max(attempt, 0), 20)
		if exp <= 0 || exp > maxWait {
			exp = maxWait
		}
		wait, source = time.Duration(rand.Int64N(int64(exp))+1), "backoff"
	}
	return now.Add(min(max(wait, 0), maxWait)), source
}

func headerWait(h http.Header, now time.Time) (time.Duration, string) {
	if v := strings.TrimSpace(h.Get("Retry-After-Ms")); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms >= 0 && ms < math.MaxInt64/float64(time.Millisecond) {
			return time.Duration(ms * float64(time.Millisecond)), "retry-after-ms"
		}
	}
	if v := strings.TrimSpace(h.Get("Retry-After")); v != "" {
		if s, err := strconv.ParseInt(v, 10, 64); err == nil && s >= 0 {
			return time.Duration(min(s, int64(math.MaxInt64/time.Second))) * time.Second, "retry-after"
		}
		if t, err := http.ParseTime(v); err == nil {
			return t.Sub(now), "retry-after"
		}
	}
	var best time.Duration
	var src string
	for k, vs := range h {
		lk := strings.ToLower(k)
		if len(vs) == 0 {
			continue
		}
		v := strings.TrimSpace(vs[0])
		var d time.Duration
		switch {
		case strings.HasPrefix(lk, "anthropic-ratelimit-") && strings.HasSuffix(lk, "-reset"):
			t, err := time.Parse(time.RFC3339, v)
			if err != nil {
				continue
			}
			d = t.Sub(now)
		case strings.HasPrefix(lk, "x-ratelimit-reset-"):
			var err error
			if d, err = time.ParseDuration(v); err != nil {
				continue
			}
		default:
			continue
		}
		if d > best || src == "" {
			best, src = d, lk
		}
	}
	return best, src
}
