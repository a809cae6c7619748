package acpmsg

import (
	"errors"
	"fmt"
	"net/url"
	"reflect"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/go-playground/validator/v10"
	"github.com/google/uuid"

	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/gitref"
)

// The spec's patterns. The custom validator tags below implement them with
// byte loops (a regexp per field would cost more than the whole JSON decode);
// validate_test.go checks each loop against the compiled pattern.
const (
	PatternStoryID  = `^US-\d{3}$`
	PatternEnvKey   = contract.PatternEnvKey
	PatternCodeName = `^[A-Z][A-Z0-9_]*$`
)

// maxValueRunes bounds FieldError.Value so that a 60 KiB field does not end up
// verbatim in logs and journals.
const maxValueRunes = 64

// FieldError is one failed rule.
type FieldError struct {
	Field   string `json:"field"`   // JSON path, e.g. payload.storyId or payload.errors[3]
	Rule    string `json:"rule"`    // short rule name, e.g. required, storyid, max
	Value   string `json:"value"`   // offending value, cut short
	Message string `json:"message"` // what the rule demands
}

func (f FieldError) String() string {
	var b strings.Builder
	if f.Field != "" {
		b.WriteString(f.Field)
		b.WriteString(": ")
	}
	b.WriteString(f.Message)
	switch {
	case f.Value == "":
	case f.Rule == "max" || f.Rule == "type":
		fmt.Fprintf(&b, " (got %s)", f.Value) // a count or a JSON kind, not user text
	default:
		fmt.Fprintf(&b, " (got %q)", f.Value)
	}
	return b.String()
}

// ValidationError lists every rule a message breaks.
type ValidationError struct {
	Fields []FieldError
}

func (e *ValidationError) Error() string {
	parts := make([]string, len(e.Fields))
	for i, f := range e.Fields {
		parts[i] = f.String()
	}
	return "invalid message: " + strings.Join(parts, "; ")
}

// FieldErrors returns the field errors carried by err: the fields of a
// *ValidationError, or one entry with an empty Field for any other error
// (oversized line, malformed JSON). It returns nil for a nil err.
func FieldErrors(err error) []FieldError {
	if err == nil {
		return nil
	}
	var ve *ValidationError
	if errors.As(err, &ve) {
		return ve.Fields
	}
	return []FieldError{{Rule: ruleOf(err), Message: err.Error()}}
}

func ruleOf(err error) string {
	switch {
	case errors.Is(err, ErrLineTooLong):
		return "size"
	case errors.Is(err, ErrInvalidUTF8):
		return "utf8"
	case errors.Is(err, ErrEmptyLine):
		return "empty"
	default:
		return "json"
	}
}

// cut shortens a value for FieldError.Value on a rune boundary.
func cut(s string) string {
	if utf8.RuneCountInString(s) <= maxValueRunes {
		return s
	}
	n := 0
	for i := range s {
		if n == maxValueRunes {
			return s[:i] + "…"
		}
		n++
	}
	return s
}

// validate is built once: a *validator.Validate caches struct metadata and is
// safe for concurrent use, and nothing mutates it after construction.
var validate = sync.OnceValue(newValidator)

func newValidator() *validator.Validate {
	v := validator.New(validator.WithRequiredStructEnabled())
	// Field names in errors are the JSON names, so namespaces are JSON paths.
	v.RegisterTagNameFunc(func(f reflect.StructField) string {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			return ""
		}
		return name
	})
	for tag, fn := range map[string]func(string) bool{
		"msgtype":  func(s string) bool { return knownType(Type(s)) },
		"rfc3339":  validTimestamp,
		"uuid4":    validUUID4,
		"branch":   gitref.ValidBranch,
		"taskpath": ValidTaskFilePath,
		"repourl":  ValidRepoURL,
		"envkey":   contract.ValidEnvKey,
		"storyid":  ValidStoryID,
		"errcode":  ValidErrorCode,
		"weburl":   validWebURL,
	} {
		if err := v.RegisterValidation(tag, func(fl validator.FieldLevel) bool {
			return fn(fl.Field().String())
		}); err != nil {
			panic(fmt.Sprintf("acpmsg: register validator tag %s: %v", tag, err))
		}
	}
	return v
}

// ruleMessages says, per validator tag, what the rule demands.
var ruleMessages = map[string]string{
	"required": "is required",
	"msgtype":  "must be one of task-request, progress-update, completion, error",
	"rfc3339":  "must be an RFC 3339 date-time, e.g. 2026-03-01T10:00:00Z",
	"uuid4":    "must be a UUID version 4 in canonical form",
	"branch":   "must be a branch name git accepts, " + gitref.Pattern + " without \"//\" or a trailing '/', not HEAD, at most 250 bytes",
	"taskpath": "must be a relative path ending in .json without '..' segments",
	"repourl":  "must be an https URL, an ssh:// URL or git@host:path",
	"envkey":   "key must match " + PatternEnvKey,
	"storyid":  "must match " + PatternStoryID,
	"errcode":  "must match " + PatternCodeName,
	"weburl":   "must be an http(s) URL or null",
}

func messageFor(fe validator.FieldError) string {
	switch fe.Tag() {
	case "oneof":
		return "must be one of " + strings.ReplaceAll(fe.Param(), " ", ", ")
	case "max":
		if fe.Kind() == reflect.Slice {
			return "must have at most " + fe.Param() + " entries"
		}
		return "must be at most " + fe.Param() + " characters"
	}
	if m, ok := ruleMessages[fe.Tag()]; ok {
		return m
	}
	return "breaks rule " + fe.Tag()
}

// Validate checks m against every rule of the spec and returns a
// *ValidationError naming each failing field, or nil.
func (m Message) Validate() error {
	return asError(m.check(nil))
}

func asError(fields []FieldError) error {
	if len(fields) == 0 {
		return nil
	}
	return &ValidationError{Fields: fields}
}

// check appends the rule violations of m to out. Fields already present in
// out (reported missing or mistyped by the decoder) are not reported again.
func (m Message) check(out []FieldError) []FieldError {
	v := validate()
	out = appendErrs(out, v.Struct(m), "")
	if m.Payload == nil {
		if knownType(m.Type) && !hasField(out, "payload") {
			out = append(out, FieldError{Field: "payload", Rule: "required", Message: "is required"})
		}
		return out
	}
	if knownType(m.Type) && m.Payload.messageType() != m.Type {
		out = append(out, FieldError{Field: "payload", Rule: "type",
			Message: fmt.Sprintf("is a %s payload but the message type is %s", m.Payload.messageType(), m.Type)})
		return out
	}
	return appendErrs(out, v.Struct(m.Payload), "payload.")
}

func appendErrs(out []FieldError, err error, prefix string) []FieldError {
	if err == nil {
		return out
	}
	var ves validator.ValidationErrors
	if !errors.As(err, &ves) {
		return append(out, FieldError{Field: strings.TrimSuffix(prefix, "."), Rule: "invalid", Message: err.Error()})
	}
	for _, fe := range ves {
		// Namespace is "<StructName>.<json path>"; drop the struct name.
		_, path, _ := strings.Cut(fe.Namespace(), ".")
		field := prefix + path
		if hasField(out, field) || hasField(out, fieldRoot(field)) {
			continue
		}
		out = append(out, FieldError{Field: field, Rule: fe.Tag(), Value: valueString(fe), Message: messageFor(fe)})
	}
	return out
}

// fieldRoot strips an index or key suffix: payload.envVars[X] -> payload.envVars.
func fieldRoot(field string) string {
	if i := strings.IndexByte(field, '['); i >= 0 {
		return field[:i]
	}
	return field
}

func hasField(fields []FieldError, field string) bool {
	for _, f := range fields {
		if f.Field == field {
			return true
		}
	}
	return false
}

func valueString(fe validator.FieldError) string {
	switch fe.Tag() {
	case "max":
		if fe.Kind() == reflect.Slice {
			return fmt.Sprintf("%d entries", reflect.ValueOf(fe.Value()).Len())
		}
		if s, ok := fe.Value().(string); ok {
			return fmt.Sprintf("%d characters", utf8.RuneCountInString(s))
		}
	}
	switch v := fe.Value().(type) {
	case string:
		if fe.Tag() == "repourl" {
			v = redactUserinfo(v)
		}
		return cut(v)
	case Type:
		return cut(string(v))
	case *string:
		if v != nil {
			return cut(redactUserinfo(*v))
		}
	}
	return ""
}

func knownType(t Type) bool {
	switch t {
	case TypeTaskRequest, TypeProgressUpdate, TypeCompletion, TypeError:
		return true
	}
	return false
}

func validTimestamp(s string) bool {
	// time.Parse accepts a fractional second after the seconds field even
	// though the layout has none, which RFC 3339 allows.
	_, err := time.Parse(time.RFC3339, s)
	return err == nil
}

// validUUID4 accepts only the canonical 36-character form: uuid.Parse also
// takes urn:uuid:, braces and bare hex, none of which is a swarm id.
func validUUID4(s string) bool {
	if len(s) != 36 {
		return false
	}
	u, err := uuid.Parse(s)
	return err == nil && u.Version() == 4 && u.Variant() == uuid.RFC4122
}

// ValidStoryID reports whether s matches the spec's story id pattern
// ^US-\d{3}$ (ASCII digits, as in Go's and JavaScript's \d).
func ValidStoryID(s string) bool {
	return len(s) == 6 && s[0] == 'U' && s[1] == 'S' && s[2] == '-' &&
		isDigit(s[3]) && isDigit(s[4]) && isDigit(s[5])
}

// ValidErrorCode reports whether s matches PatternCodeName (error codes).
func ValidErrorCode(s string) bool {
	if s == "" || !isUpper(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		if c := s[i]; !isUpper(c) && !isDigit(c) && c != '_' {
			return false
		}
	}
	return true
}

// ValidTaskFilePath reports whether s is a valid task-request taskFilePath.
// The spec says a relative path ending in .json; a '..'
// segment or an absolute path would let a message point outside the
// repository, so both are refused here rather than left to every consumer.
func ValidTaskFilePath(s string) bool {
	if len(s) <= len(".json") || !strings.HasSuffix(s, ".json") || strings.HasPrefix(s, "/") || strings.ContainsRune(s, 0) {
		return false
	}
	for seg := range strings.SplitSeq(strings.ReplaceAll(s, `\`, "/"), "/") {
		if seg == ".." {
			return false
		}
	}
	return true
}

// ValidRepoURL reports whether s is a valid task-request repoUrl: an
// https://host/... or ssh://host/... URL, or the scp form user@host:path
// that git uses for ssh.
func ValidRepoURL(s string) bool {
	if strings.ContainsAny(s, " \t\r\n") || s == "" {
		return false
	}
	if strings.HasPrefix(s, "https://") || strings.HasPrefix(s, "ssh://") {
		u, err := url.Parse(s)
		return err == nil && (u.Scheme == "https" || u.Scheme == "ssh") && u.Host != "" && u.Hostname() != ""
	}
	user, rest, ok := strings.Cut(s, "@")
	if !ok || user == "" {
		return false
	}
	host, path, ok := strings.Cut(rest, ":")
	if !ok || host == "" || path == "" || strings.HasPrefix(path, "//") {
		return false
	}
	for i := 0; i < len(user); i++ {
		if c := user[i]; !isAlnum(c) && c != '.' && c != '_' && c != '-' {
			return false
		}
	}
	for i := 0; i < len(host); i++ {
		if c := host[i]; !isAlnum(c) && c != '.' && c != '-' {
			return false
		}
	}
	return true
}

func validWebURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "https" || u.Scheme == "http") && u.Hostname() != "" &&
		!strings.ContainsAny(s, " \t\r\n")
}

func isAlnum(c byte) bool { return isDigit(c) || isUpper(c) || (c >= 'a' && c <= 'z') }
func isUpper(c byte) bool { return c >= 'A' && c <= 'Z' }
func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// redactUserinfo hides the user and password of scheme://user:pass@host/...
// URLs: a token in a clone URL must not reach logs or the journal through a
// validation error.
func redactUserinfo(s string) string {
	_, rest, ok := strings.Cut(s, "://")
	if !ok {
		return s
	}
	authority, _, _ := strings.Cut(rest, "/")
	at := strings.LastIndexByte(authority, '@')
	if at < 0 {
		return s
	}
	start := len(s) - len(rest)
	return s[:start] + "***" + s[start+at:]
}
