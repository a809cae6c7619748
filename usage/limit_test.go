package usage

import (
	"net/http"
	"testing"
	"time"
)

func TestLimitReset(t *testing.T) {
	now := time.Date(2026, 11, 25, 22, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name   string
		h      map[string]string
		want   time.Duration
		source string
	}{
		{"retry-after seconds", map[string]string{"Retry-After": "30"}, 30 * time.Second, "retry-after"},
		{"retry-after date", map[string]string{"Retry-After": now.Add(90 * time.Second).Format(http.TimeFormat)}, 90 * time.Second, "retry-after"},
		{"retry-after-ms first", map[string]string{"Retry-After-Ms": "1500", "Retry-After": "30"}, 1500 * time.Millisecond, "retry-after-ms"},
		{"anthropic resets: the latest", map[string]string{
			"Anthropic-Ratelimit-Requests-Reset": now.Add(10 * time.Second).Format(time.RFC3339),
			"Anthropic-Ratelimit-Tokens-Reset":   now.Add(40 * time.Second).Format(time.RFC3339)}, 40 * time.Second, "anthropic-ratelimit-tokens-reset"},
		{"openai resets", map[string]string{"X-Ratelimit-Reset-Requests": "6m0s", "X-Ratelimit-Reset-Tokens": "20ms"}, 6 * time.Minute, "x-ratelimit-reset-requests"},
		{"enormous retry-after is bounded", map[string]string{"Retry-After": "99999999999999"}, DefaultLimitMaxWait, "retry-after"},
		{"a reset in the past waits nothing", map[string]string{"Anthropic-Ratelimit-Requests-Reset": now.Add(-time.Hour).Format(time.RFC3339)}, 0, "anthropic-ratelimit-requests-reset"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{}
			for k, v := range tc.h {
				h.Set(k, v)
			}
			until, src := LimitReset(h, now, 0, 0)
			if got := until.Sub(now); got != tc.want || src != tc.source {
				t.Fatalf("wait %v from %s, want %v from %s", got, src, tc.want, tc.source)
			}
		})
	}
	for _, garbage := range []string{"-5", "soon", "", "1e3"} {
		h := http.Header{"Retry-After": {garbage}, "X-Ratelimit-Reset-Requests": {"later"}, "Anthropic-Ratelimit-Tokens-Reset": {"tomorrow"}}
		until, src := LimitReset(h, now, 3, time.Minute)
		if w := until.Sub(now); src != "backoff" || w <= 0 || w > 16*time.Second {
			t.Errorf("%q: wait %v from %s, want a jittered backoff up to 16s", garbage, w, src)
		}
	}
	if until, _ := LimitReset(nil, now, 60, time.Minute); until.Sub(now) > time.Minute {
		t.Errorf("backoff past maxWait: %v", until.Sub(now))
	}
}

func FuzzLimitReset(f *testing.F) {
	f.Add("30", "6m0s", "2026-11-25T22:01:00Z", 0)
	f.Add("-1", "-5s", "garbage", 40)
	f.Fuzz(func(t *testing.T, ra, xr, ar string, attempt int) {
		now := time.Date(2026, 11, 25, 22, 0, 0, 0, time.UTC)
		h := http.Header{"Retry-After": {ra}, "X-Ratelimit-Reset-Tokens": {xr}, "Anthropic-Ratelimit-Requests-Reset": {ar}}
		until, _ := LimitReset(h, now, attempt, time.Hour)
		if w := until.Sub(now); w < 0 || w > time.Hour {
			t.Fatalf("wait %v outside [0, 1h]", w)
		}
	})
}
