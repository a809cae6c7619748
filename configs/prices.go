package configs

import (
	"fmt"
	"maps"
	"slices"
	"strconv"

	"github.com/aimi-tools/swarm/usage"
)

// prices reads models.<provider>.prices: input, output, cache_read and
// cache_write per million tokens. The built-in providers start from
// usage.DefaultPrices; a provider without prices costs nothing.
func prices(raw map[string]any, bad func(k, why, fix string)) map[string]usage.Prices {
	out := usage.DefaultPrices()
	for _, name := range slices.Sorted(maps.Keys(raw)) {
		m, _ := raw[name].(map[string]any)
		pm, ok := m["prices"]
		if !ok {
			continue
		}
		k := "models." + name + ".prices"
		fields, ok := pm.(map[string]any)
		if !ok {
			bad(k, "is not a map", "write input:, output:, cache_read: and cache_write: under it (per million tokens)")
			continue
		}
		p := out[name]
		for f, v := range fields {
			n, err := number(v)
			var dst *float64
			switch f {
			case "input":
				dst = &p.Input
			case "output":
				dst = &p.Output
			case "cache_read":
				dst = &p.CacheRead
			case "cache_write":
				dst = &p.CacheWrite
			default:
				bad(k+"."+f, "is not a price", "use input, output, cache_read or cache_write")
				continue
			}
			if err != nil || n < 0 {
				bad(k+"."+f, fmt.Sprintf("%v is not a price", v), "give a number per million tokens, 0 or more, e.g. 3 or 0.30")
				continue
			}
			*dst = n
		}
		if err := p.Check(); err != nil {
			bad(k, err.Error(), "give numbers per million tokens")
			continue
		}
		out[name] = p
	}
	return out
}

// number reads a YAML or environment value as a float.
func number(v any) (float64, error) {
	switch n := v.(type) {
	case int:
		return float64(n), nil
	case int64:
		return float64(n), nil
	case float64:
		return n, nil
	case string:
		return strconv.ParseFloat(n, 64)
	}
	return 0, fmt.Errorf("%T is not a number", v)
}
