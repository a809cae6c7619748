package configs

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/spf13/viper"
)

// Notify is where notices go (package notify): webhook URLs and a local
// command. The URLs may hold tokens (Slack's do): they are never logged.
type Notify struct {
	Webhooks []string
	Command  []string
	// BoardURL is a link to the board put into notices (never its token).
	BoardURL string
}

// listKeys are the keys holding string lists; they come from files only.
var listKeys = []string{"notify.webhooks", "notify.command", EgressAllowKey}

// notifyConfig reads the notify section.
func notifyConfig(v *viper.Viper) (Notify, []string) {
	var n Notify
	var probs []string
	n.Webhooks, probs = stringList(v, "notify.webhooks", probs)
	n.Command, probs = stringList(v, "notify.command", probs)
	for i, w := range n.Webhooks {
		u, err := url.Parse(strings.TrimPrefix(w, "ntfy:"))
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			// The value is not repeated: it may hold a token.
			probs = append(probs, fmt.Sprintf("notify.webhooks: entry %d is not an http(s) URL; use https://... or ntfy:https://ntfy.sh/TOPIC", i+1))
		}
	}
	if len(n.Command) > 0 && strings.TrimSpace(n.Command[0]) == "" {
		probs = append(probs, "notify.command: the first word (the program) is empty; write it as a list, e.g. [notify-send, aimi]")
	}
	n.BoardURL = strings.TrimSpace(v.GetString("notify.board_url"))
	if b := n.BoardURL; b != "" && !strings.HasPrefix(b, "http://") && !strings.HasPrefix(b, "https://") {
		probs = append(probs, "notify.board_url: "+b+" is not an http(s) URL")
	}
	return n, probs
}

func stringList(v *viper.Viper, k string, probs []string) ([]string, []string) {
	raw := v.Get(k)
	if raw == nil {
		return nil, probs
	}
	items, ok := raw.([]any)
	if !ok {
		return nil, append(probs, k+": is not a list; write it as [a, b] or as - lines")
	}
	out := make([]string, 0, len(items))
	for i, it := range items {
		s, ok := it.(string)
		if !ok {
			return nil, append(probs, fmt.Sprintf("%s: entry %d is not a string", k, i+1))
		}
		out = append(out, s)
	}
	return out, probs
}
