package redact

import (
	"encoding/base64"
	"encoding/hex"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

const key = "sk-test-NOTICESECRET-0123456789"

func TestStringRedactsEveryFormItCovers(t *testing.T) {
	r := New(map[string]string{"API_KEY": key, "PIN": "1234", "EMPTY": ""},
		Pattern{Name: "placeholder", Re: regexp.MustCompile(`aimi-gateway-[0-9a-f]{16,}`)})
	m := Marker("API_KEY")
	cases := []struct {
		name, in, want string
	}{
		{"as it is", "use " + key + " now", "use " + m + " now"},
		{"upper case", "TOKEN " + strings.ToUpper(key), "TOKEN " + m},
		{"split by spaces", "echo sk-t est- NOTI CESE CRET -012 3456 789!", "echo " + m + "!"},
		{"split by invisible and control characters", "x sk-test-NOTICE\u200bSECRET\x00-0123456789 y", "x " + m + " y"},
		{"twice", key + key, m + m},
		{"hex", "h=" + hex.EncodeToString([]byte(key)), "h=" + m},
		{"percent-encoded", "q=" + url.QueryEscape("a/"+key), "q=a%2F" + m},
		{"base64", "b=" + base64.StdEncoding.EncodeToString([]byte(key)), "b=" + m + "Q=="}, // Q: two bits of the key's last byte
		{"pattern", "ph aimi-gateway-0123456789abcdef0123", "ph " + Marker("placeholder")},
		{"short value left", "pin 1234", "pin 1234"},
		{"nothing to do", "plain text", "plain text"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := r.String(c.in); got != c.want {
				t.Errorf("String(%q) = %q, want %q", c.in, got, c.want)
			}
		})
	}
	if s := r.Short(); len(s) != 1 || s[0] != "PIN" {
		t.Errorf("Short() = %v, want [PIN]", s)
	}
}

// TestBase64AtEveryAlignment: the value inside a longer base64 text is
// found whatever precedes it.
func TestBase64AtEveryAlignment(t *testing.T) {
	r := New(map[string]string{"K": key})
	for lead := range 6 {
		enc := base64.URLEncoding.EncodeToString([]byte(strings.Repeat("z", lead) + key + "tail"))
		if got := r.String(enc); !strings.Contains(got, Marker("K")) {
			t.Errorf("lead %d: %q not redacted: %q", lead, enc, got)
		}
	}
}

func TestNilAndLongValues(t *testing.T) {
	var r *Redactor
	if r.String(key) != key || r.Short() != nil {
		t.Error("the nil Redactor changed text")
	}
	long := strings.Repeat("ab-cd ", 200)
	r = New(map[string]string{"PEM": long})
	if got := r.String("x" + strings.ToUpper(long) + "y"); got != "x"+Marker("PEM")+"y" {
		t.Errorf("long value: %q", got)
	}
}

// skeleton is s's letters and digits, lower-cased.
func skeleton(s string) string {
	var b strings.Builder
	for _, c := range strings.ToLower(s) {
		if unicode.IsLetter(c) || unicode.IsDigit(c) {
			b.WriteRune(c)
		}
	}
	return b.String()
}

// FuzzString: whatever the text and the value, the text that comes out
// holds the value neither as it is nor in its letters and digits (case
// folded), and is UTF-8 when the text was.
func FuzzString(f *testing.F) {
	f.Add("use sk-test-NOTICESECRET now", "sk-test-NOTICESECRET")
	f.Add("[secret:K][secret:K]", "secretk")
	f.Add("a b c d e f g", "abcdefg")
	f.Add(strings.Repeat("x", 100), "xxxxxxxx")
	f.Fuzz(func(t *testing.T, text, value string) {
		if len(value) > maxSpread || !isASCII(value) {
			return // case folding beyond ASCII differs between regexp and strings
		}
		r := New(map[string]string{"K": value})
		got := r.String(text)
		if utf8.ValidString(text) && !utf8.ValidString(got) {
			t.Fatalf("String(%q) = %q: not UTF-8", text, got)
		}
		if len(r.rules) == 0 {
			return
		}
		if sk := skeleton(value); len([]rune(sk)) >= MinLen && strings.Contains(skeleton(got), sk) && got != Withheld {
			t.Fatalf("value %q left in %q (from %q)", value, got, text)
		}
		if strings.Contains(strings.ToLower(got), strings.ToLower(value)) && got != Withheld {
			t.Fatalf("value %q left as it is in %q (from %q)", value, got, text)
		}
	})
}

func isASCII(s string) bool {
	for i := range len(s) {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}
