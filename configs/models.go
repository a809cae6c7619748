package configs

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/spf13/viper"

	"github.com/aimi-tools/swarm/gateway"
)

// modelKeys are the scalar keys of the built-in providers' upstreams
// (AIMI_MODELS_ANTHROPIC_URL, --models-anthropic-url).
var modelKeys = []key{
	{"models.anthropic.url", "upstream of the model gateway's anthropic provider (ANTHROPIC_BASE_URL as it would be without the gateway)"},
	{"models.openai.url", "upstream of the model gateway's openai provider (OPENAI_BASE_URL as it would be without the gateway)"},
	{"models.gemini.url", "upstream of the model gateway's gemini provider (GOOGLE_GEMINI_BASE_URL as it would be without the gateway)"},
}

// models reads models.<name>: the built-in providers with their url, and
// providers declared with url, keys ({VAR: bearer | x-api-key |
// x-goog-api-key | a header}) and base_url_env ([VAR...]). A bad entry is a
// problem naming its key. It sets c.Models.
func models(v *viper.Viper, sources []source, c *Config) []string {
	provs := gateway.Builtin()
	var probs []string
	bad := func(k, why, fix string) {
		probs = append(probs, fmt.Sprintf("%s: %s (from %s); %s", k, why, origin(sources, k), fix))
	}
	raw, _ := v.Get("models").(map[string]any)
	c.Prices = prices(raw, bad)
	for _, name := range slices.Sorted(maps.Keys(raw)) {
		m, ok := raw[name].(map[string]any)
		if !ok {
			bad("models."+name, "is not a map", "write url:, keys: and base_url_env: under it")
			continue
		}
		p, builtin := provs[name]
		p.Name = name
		for k := range m {
			if k != "url" && k != "prices" && k != "max_concurrent" && k != "requests_per_minute" && (builtin || (k != "keys" && k != "base_url_env")) {
				bad("models."+name+"."+k, "is not a key of a provider", "a built-in provider takes url, prices, max_concurrent and requests_per_minute only; a declared one those, keys and base_url_env")
			}
		}
		// v.GetString sees a flag bound to the key; the map does not.
		raw := v.GetString("models." + name + ".url")
		u, err := gateway.ParseURL(raw)
		if err != nil {
			bad("models."+name+".url", fmt.Sprintf("%q is not a usable upstream: %v", raw, err), "use the provider's API base, e.g. https://api.anthropic.com, or http://127.0.0.1:8080/v1 for a local server")
			continue
		}
		p.URL = u
		p.MaxConcurrent = maxConcurrent(name, m, bad)
		p.RequestsPerMinute = requestsPerMinute(name, m, bad)
		if !builtin {
			p.Keys, p.BaseURLEnv = map[string]string{}, nil
			if km, ok := m["keys"].(map[string]any); ok {
				for k, a := range km {
					p.Keys[strings.ToUpper(k)] = strings.ToLower(fmt.Sprint(a))
				}
			}
			if l, ok := m["base_url_env"].([]any); ok {
				for _, e := range l {
					p.BaseURLEnv = append(p.BaseURLEnv, fmt.Sprint(e))
				}
			}
		}
		if err := p.Check(); err != nil {
			bad("models."+name, err.Error(), "see the models section of configs/aimi.yaml")
			continue
		}
		provs[name] = p
	}
	probs = append(probs, modelConflicts(provs, c.Agent.Env)...)
	c.Models = provs
	if _, _, used := gateway.Split(c.Agent.Env, provs); len(used) > 0 && c.Engine.Backend == BackendSwarm && c.Git.Address == "" {
		probs = append(probs, "git.address: is empty but engine.backend is swarm and agent.env holds model keys; set git.address to an IP of this machine every node reaches (the model gateway listens there)")
	}
	return probs
}

// modelConflicts: a key variable taken by two providers is ambiguous, and a
// base-URL variable in agent.env next to its provider's key would be
// overwritten by the gateway's (models.<name>.url is where it goes).
func modelConflicts(provs map[string]gateway.Provider, agentEnv map[string]string) []string {
	var probs []string
	owner := map[string]string{}
	for _, name := range slices.Sorted(maps.Keys(provs)) {
		for _, k := range slices.Sorted(maps.Keys(provs[name].Keys)) {
			if o, ok := owner[k]; ok {
				probs = append(probs, fmt.Sprintf("models.%s.keys: %s is already a key of models.%s; give each key variable one provider", name, k, o))
			}
			owner[k] = name
		}
	}
	_, _, used := gateway.Split(agentEnv, provs)
	for _, name := range used {
		for _, b := range provs[name].BaseURLEnv {
			if _, ok := agentEnv[b]; ok {
				probs = append(probs, fmt.Sprintf("agent.env: %s is set, but the model gateway sets it to itself for %s; put that URL in models.%s.url instead", b, name, name))
			}
		}
	}
	return probs
}
