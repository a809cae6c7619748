// Package termsafe makes text from containers, agents and task files safe to
// show on a terminal: every control character (C0 but newline and tab, DEL,
// C1 whether as a raw byte or UTF-8) and every bidi override or isolate is
// replaced by its visible \uXXXX escape, and bytes that are not UTF-8 by
// U+FFFD. The replacement is chosen so that JSON stays JSON with the same
// value: those characters can only stand inside JSON strings, where
// \uXXXX means the character itself.
package termsafe
