package redact

import (
	"encoding/base64"
	"encoding/hex"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MinLen is the shortest value (in letters and digits, or in bytes for a
// value of mostly punctuation) that is redacted.
const MinLen = 6

// maxSpread is the longest value found in every form: a longer one (a
// PEM key) is found only as it is, case folded, which keeps the
// expressions small.
const maxSpread = 512

// minEncoded is the shortest encoded form (hex, base64) looked for: a
// shorter one would match unrelated identifiers by chance.
const minEncoded = 10

// maxPasses bounds the passes over one text: a replacement cannot form a
// value again in practice, but a text that still holds one after that is
// withheld rather than shown.
const maxPasses = 3

// Withheld replaces a text that still held a secret after maxPasses.
const Withheld = "[secret text withheld]"

// Marker is what replaces the value of the secret name.
func Marker(name string) string { return "[secret:" + name + "]" }

// Pattern is a kind of secret known by its shape rather than its value
// (the placeholders the model gateway makes).
type Pattern struct {
	Name string
	Re   *regexp.Regexp
}

// Redactor replaces secrets in text. The nil Redactor replaces nothing.
// It is safe for concurrent use.
type Redactor struct {
	rules []rule
	short []string
}

type rule struct {
	name string
	re   *regexp.Regexp
}

// New builds a Redactor of the values (by name) and patterns. Values
// shorter than MinLen are left out (see Short).
func New(values map[string]string, patterns ...Pattern) *Redactor {
	r := &Redactor{}
	names := make([]string, 0, len(values))
	for name := range values {
		names = append(names, name)
	}
	// Longer values first: where two overlap, the longer names the span.
	slices.SortFunc(names, func(a, b string) int {
		if d := len(values[b]) - len(values[a]); d != 0 {
			return d
		}
		return strings.Compare(a, b)
	})
	for _, name := range names {
		v := values[name]
		forms := formsOf(v)
		if len(forms) == 0 {
			if v != "" {
				r.short = append(r.short, name)
			}
			continue
		}
		re, err := regexp.Compile("(?i)" + strings.Join(forms, "|"))
		if err != nil { // too large an expression: the value as it is
			re = regexp.MustCompile("(?i)" + regexp.QuoteMeta(v))
		}
		r.rules = append(r.rules, rule{name: name, re: re})
	}
	for _, p := range patterns {
		r.rules = append(r.rules, rule{name: p.Name, re: p.Re})
	}
	slices.Sort(r.short)
	return r
}

// Short names the values too short to be redacted.
func (r *Redactor) Short() []string {
	if r == nil {
		return nil
	}
	return r.short
}

// String returns s with every secret replaced by its Marker.
func (r *Redactor) String(s string) string {
	if r == nil || len(r.rules) == 0 || s == "" {
		return s
	}
	for range maxPasses {
		out, changed := r.pass(s)
		if !changed {
			return out
		}
		s = out
	}
	if _, changed := r.pass(s); changed {
		return Withheld
	}
	return s
}

// pass replaces every match of every rule, found in s as it is: spans of
// several rules that overlap become one, named by the first rule.
func (r *Redactor) pass(s string) (string, bool) {
	type span struct {
		from, to int
		name     string
	}
	var spans []span
	for _, ru := range r.rules {
		for _, m := range ru.re.FindAllStringIndex(s, -1) {
			if m[1] > m[0] {
				spans = append(spans, span{m[0], m[1], ru.name})
			}
		}
	}
	if len(spans) == 0 {
		return s, false
	}
	slices.SortStableFunc(spans, func(a, b span) int { return a.from - b.from })
	var b strings.Builder
	at := 0
	for i := 0; i < len(spans); {
		cur := spans[i]
		for i++; i < len(spans) && spans[i].from < cur.to; i++ {
			cur.to = max(cur.to, spans[i].to)
		}
		b.WriteString(s[at:cur.from])
		b.WriteString(Marker(cur.name))
		at = cur.to
	}
	b.WriteString(s[at:])
	return b.String(), true
}

// formsOf returns the expressions that find v: as it is and encoded, each
// tolerant of separators between its letters and digits.
func formsOf(v string) []string {
	if len(v) > maxSpread {
		return []string{regexp.QuoteMeta(v)}
	}
	var forms []string
	add := func(form string, min int) {
		if e := spread(form, min); e != "" && !slices.Contains(forms, e) {
			forms = append(forms, e)
		}
	}
	add(v, MinLen)
	if len(forms) == 0 && utf8.RuneCountInString(v) >= MinLen {
		// Mostly punctuation: found only as it is (case folded).
		forms = append(forms, regexp.QuoteMeta(v))
	}
	if len(forms) == 0 {
		return nil
	}
	add(hex.EncodeToString([]byte(v)), minEncoded)
	add(url.QueryEscape(v), MinLen)
	add(url.PathEscape(v), MinLen)
	for _, core := range base64Cores([]byte(v)) {
		add(core, minEncoded)
	}
	return forms
}

// spread is an expression matching the letters and digits of form in
// order, with anything but letters and digits between them; "" when form
// has fewer than min of them.
func spread(form string, min int) string {
	var parts []string
	for _, c := range form {
		if unicode.IsLetter(c) || unicode.IsDigit(c) {
			parts = append(parts, regexp.QuoteMeta(string(c)))
		}
	}
	if len(parts) < min {
		return ""
	}
	// Separators: anything but ASCII letters and digits. A class of all
	// Unicode letters made the expressions of a long value take a second
	// to compile.
	return strings.Join(parts, `[^0-9A-Za-z]*`)
}

// base64Cores returns, for each of the three alignments v can have inside
// a longer base64 text, the characters that depend on v's bytes alone
// (standard alphabet: the URL one differs only in punctuation, which
// spread skips).
func base64Cores(v []byte) []string {
	var cores []string
	for lead := range 3 {
		data := append(make([]byte, lead), v...)
		enc := base64.RawStdEncoding.EncodeToString(data)
		from := (8*lead + 5) / 6 // first character with no bit of the lead
		to := 8 * len(data) / 6  // past the last one with no bit of what follows
		if to-from >= minEncoded {
			cores = append(cores, enc[from:to])
		}
	}
	return cores
}
