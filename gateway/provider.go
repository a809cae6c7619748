package gateway

import (
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"github.com/aimi-tools/swarm/contract"
)

// How a key goes upstream (Provider.Keys values).
const (
	// AuthBearer sends the key as "Authorization: Bearer <key>".
	AuthBearer = "bearer"
	// AuthXAPIKey sends it in x-api-key (Anthropic's API keys).
	AuthXAPIKey = "x-api-key"
	// AuthGoogAPIKey sends it in x-goog-api-key (the Gemini API).
	AuthGoogAPIKey = "x-goog-api-key"
)

// Provider is one model API the gateway forwards to.
type Provider struct {
	// Name is the provider's config key (models.<name>) and the first
	// segment of its path on the gateway.
	Name string
	// URL is the upstream base: what the provider's base-URL variable
	// would hold without the gateway (https://api.anthropic.com,
	// https://api.openai.com/v1). A request for /<name>/<rest> goes to
	// URL/<rest>.
	URL *url.URL
	// BaseURLEnv are the variables the sandbox gets pointing at the
	// gateway (ANTHROPIC_BASE_URL).
	BaseURLEnv []string
	// Keys maps each key variable of agent.env this provider takes to how
	// the key goes upstream: AuthBearer, AuthXAPIKey, AuthGoogAPIKey, or
	// another header's name (the key as its value).
	Keys map[string]string
	// MaxConcurrent bounds this provider's calls in flight across the
	// daemon (models.<name>.max_concurrent; 0: no bound). Calls past it
	// wait at the gateway, round-robin between containers.
	MaxConcurrent int
	// RequestsPerMinute bounds this provider's calls begun in any minute
	// across the daemon (models.<name>.requests_per_minute; 0: no bound).
	// Calls past it wait at the gateway the same fair way.
	RequestsPerMinute int
}

// Builtin are the providers known without configuration; models.<name>
// sets their url, and models.<other> declares more (see configs/aimi.yaml).
func Builtin() map[string]Provider {
	must := func(s string) *url.URL {
		u, err := url.Parse(s)
		if err != nil {
			panic(err)
		}
		return u
	}
	return map[string]Provider{
		"anthropic": {
			Name: "anthropic", URL: must("https://api.anthropic.com"),
			BaseURLEnv: []string{"ANTHROPIC_BASE_URL"},
			Keys:       map[string]string{"ANTHROPIC_API_KEY": AuthXAPIKey, "ANTHROPIC_AUTH_TOKEN": AuthBearer},
		},
		"openai": {
			Name: "openai", URL: must("https://api.openai.com/v1"),
			BaseURLEnv: []string{"OPENAI_BASE_URL"},
			Keys:       map[string]string{"OPENAI_API_KEY": AuthBearer, "CODEX_API_KEY": AuthBearer},
		},
		"gemini": {
			Name: "gemini", URL: must("https://generativelanguage.googleapis.com"),
			BaseURLEnv: []string{"GOOGLE_GEMINI_BASE_URL", "GEMINI_BASE_URL"},
			Keys:       map[string]string{"GEMINI_API_KEY": AuthGoogAPIKey, "GOOGLE_API_KEY": AuthGoogAPIKey},
		},
	}
}

var (
	nameRE   = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,31}$`)
	headerRE = regexp.MustCompile(`^[A-Za-z0-9-]{1,64}$`)
)

// ParseURL checks a models.<name>.url value: an absolute http(s) URL with a
// host and nothing a base URL cannot carry (user info, query, fragment).
// http:// is accepted for local servers and tests.
func ParseURL(raw string) (*url.URL, error) {
	u, err := url.Parse(strings.TrimSpace(raw))
	switch {
	case err != nil:
		return nil, fmt.Errorf("not a URL: %w", err)
	case u.Scheme != "https" && u.Scheme != "http":
		return nil, fmt.Errorf("scheme %q: use https:// (or http:// for a local server)", u.Scheme)
	case u.Host == "" || u.Hostname() == "":
		return nil, fmt.Errorf("no host")
	case u.User != nil:
		return nil, fmt.Errorf("user information in the URL: keys go in agent.env")
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
		return nil, fmt.Errorf("a query or fragment: give the base URL only")
	}
	u.Path = strings.TrimRight(u.Path, "/")
	u.RawPath = ""
	return u, nil
}

// Check validates a provider declared in configuration (name, key
// variables, how each goes upstream, base-URL variables).
func (p Provider) Check() error {
	if !nameRE.MatchString(p.Name) {
		return fmt.Errorf("name %q: use lower-case letters, digits, '-' and '_'", p.Name)
	}
	if p.URL == nil {
		return fmt.Errorf("no url")
	}
	if len(p.Keys) == 0 {
		return fmt.Errorf("no key variables (keys: {NAME_API_KEY: bearer})")
	}
	for k, a := range p.Keys {
		if !contract.ValidEnvKey(k) {
			return fmt.Errorf("key variable %q is not an environment name", k)
		}
		if a != AuthBearer && a != AuthXAPIKey && a != AuthGoogAPIKey && !headerRE.MatchString(a) {
			return fmt.Errorf("key %s: %q is neither bearer, x-api-key, x-goog-api-key nor a header name", k, a)
		}
	}
	for _, e := range p.BaseURLEnv {
		if !contract.ValidEnvKey(e) {
			return fmt.Errorf("base URL variable %q is not an environment name", e)
		}
	}
	return nil
}

// setKey puts key into h the way auth says.
func setKey(h http.Header, auth, key string) {
	switch auth {
	case AuthBearer:
		h.Set("Authorization", "Bearer "+key)
	default:
		h.Set(auth, key)
	}
}

// Split takes the model keys out of an agent environment: keys holds the
// variables some provider takes (their real values, for the gateway),
// rest everything else (for the sandbox as is). A provider whose key is
// not in env is left out of used.
func Split(env map[string]string, providers map[string]Provider) (keys, rest map[string]string, used []string) {
	keys, rest = map[string]string{}, map[string]string{}
	owner := keyOwners(providers)
	seen := map[string]bool{}
	for k, v := range env {
		if p, ok := owner[k]; ok {
			keys[k] = v
			seen[p] = true
			continue
		}
		rest[k] = v
	}
	return keys, rest, slices.Sorted(maps.Keys(seen))
}

// keyOwners maps each key variable to its provider's name.
func keyOwners(providers map[string]Provider) map[string]string {
	owner := map[string]string{}
	for _, name := range slices.Sorted(maps.Keys(providers)) {
		for k := range providers[name].Keys {
			if _, taken := owner[k]; !taken {
				owner[k] = name
			}
		}
	}
	return owner
}
