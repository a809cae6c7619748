package contract

import (
	"regexp"
	"time"
)

// The model gateway's side of a sandbox (package gateway): what the
// runner needs to ask it whether its container's calls are limited.
const (
	// EnvGatewayURL is the model gateway's root as the sandbox reaches it
	// (https://IP:PORT/), set with the placeholders of a container that
	// has model access.
	EnvGatewayURL = "AIMI_GATEWAY_URL"
	// GatewayPlaceholderPrefix starts every placeholder the gateway hands
	// out (followed by 64 hex digits), so a leak is recognisable and the
	// runner finds one in its environment.
	GatewayPlaceholderPrefix = "aimi-gateway-"
	// GatewayLimitsPath answers GatewayLimits to a GET authenticated by
	// one of the container's placeholders (x-api-key or a bearer token).
	// No provider's name starts with "_", so it is never forwarded.
	GatewayLimitsPath = "/_aimi/limits"
)

// GatewayPlaceholderName is what a gateway placeholder shows as in text
// with its secrets replaced: [secret:model-key-placeholder].
const GatewayPlaceholderName = "model-key-placeholder"

// GatewayPlaceholderRe finds the gateway's placeholders (the prefix and
// the hex of their random bytes), whoever's they are.
var GatewayPlaceholderRe = regexp.MustCompile(`(?i)` + regexp.QuoteMeta(GatewayPlaceholderPrefix) + `[0-9a-f]{16,}`)

// GatewayLimits is the gateway's answer at GatewayLimitsPath: the
// providers whose limits held the asking container's calls.
type GatewayLimits struct {
	Now    time.Time      `json:"now"`
	Limits []GatewayLimit `json:"limits"`
}

// GatewayLimit is one provider's limit as the asking container met it.
type GatewayLimit struct {
	Provider string `json:"provider"`
	// Until is when the limit resets (the latest the gateway knows).
	Until time.Time `json:"until"`
	// Hit is when a call of this container last got a limited answer
	// (the provider's 429 or 529, or the gateway's own 429 for a call it
	// held); zero when only the provider's current limit is known.
	Hit time.Time `json:"hit,omitzero"`
}
