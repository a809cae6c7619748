// Package redact keeps known secret values out of text that an agent
// supplies and people read: every appearance of a secret is replaced by
// [secret:NAME]. The daemon builds one Redactor from the values it knows
// (agent.env, the publish token) and the shapes of the credentials it
// makes (model key placeholders), and applies it where agent text enters
// the inbox and again where a notice leaves the daemon.
//
// A value is found as it is and in the forms an agent can give it without
// effort: with its letters in another case, split by spaces, punctuation,
// control or invisible characters, hex-encoded, base64-encoded (standard
// or URL alphabet, at any alignment inside a longer encoding) and
// percent-encoded. It is not found reversed, shuffled, compressed,
// encrypted, in another encoding (base32, rot13), spread over several
// requests or fields, or told in words: redaction keeps honest mistakes
// and lazy leaks out, not a determined agent, which the sandbox's lack of
// a network and the bounds on notices limit instead.
//
// A value shorter than MinLen is not redacted: it would blank common
// words and numbers everywhere and a secret that short is guessed anyway.
// Short reports their names so that the daemon can warn.
package redact
