// Package usage counts what model calls spend: the token usage in a
// provider's answer (Anthropic, OpenAI, Gemini; JSON and streamed SSE), the
// cost of it at configured prices, and totals per container and story.
//
// Answers are untrusted input read as they stream: a Meter keeps bounded
// memory whatever the answer, takes usage blocks with wrong types or
// negative counts as absent, and counts a stream cut mid-way as far as it
// is readable.
package usage
