package mcpserver

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// clientConfig is how one MCP client is told to start `aimi mcp`: the
// file it reads and the snippet for it, and the command that writes it.
type clientConfig struct {
	file    string // where the snippet goes
	add     string // the client's own command that adds it, "" if none
	snippet func(args []string) string
}

// serverName is the name the snippets give the server in the client.
const serverName = "aimi"

// clientConfigs are the clients --print-config knows, checked against
// each client's documentation (docs/mcp.md says which pages).
var clientConfigs = map[string]clientConfig{
	"claude-code": {
		file: ".mcp.json in the repository (project scope), or claude mcp add",
		add:  "claude mcp add --scope project " + serverName + " -- ",
		snippet: func(args []string) string {
			return jsonSnippet(map[string]any{"mcpServers": map[string]any{serverName: map[string]any{
				"type": "stdio", "command": args[0], "args": args[1:]}}})
		},
	},
	"codex": {
		file: "~/.codex/config.toml, or .codex/config.toml in a trusted project",
		add:  "codex mcp add " + serverName + " -- ",
		snippet: func(args []string) string {
			q := make([]string, len(args)-1)
			for i, a := range args[1:] {
				q[i] = tomlString(a)
			}
			return fmt.Sprintf("[mcp_servers.%s]\ncommand = %s\nargs = [%s]\n", serverName, tomlString(args[0]), strings.Join(q, ", "))
		},
	},
	"gemini": {
		file: ".gemini/settings.json in the repository, or ~/.gemini/settings.json",
		add:  "gemini mcp add " + serverName + " ",
		snippet: func(args []string) string {
			return jsonSnippet(map[string]any{"mcpServers": map[string]any{serverName: map[string]any{
				"command": args[0], "args": args[1:]}}})
		},
	},
	"opencode": {
		file: "opencode.json in the repository, or ~/.config/opencode/opencode.json",
		snippet: func(args []string) string {
			return jsonSnippet(map[string]any{"$schema": "https://opencode.ai/config.json", "mcp": map[string]any{serverName: map[string]any{
				"type": "local", "command": args, "enabled": true}}})
		},
	},
}

// tomlString is s as a TOML basic string: a JSON string is one.
func tomlString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func jsonSnippet(v any) string {
	b, _ := json.MarshalIndent(v, "", "  ")
	return string(b) + "\n"
}

// ClientNames are the clients --print-config knows, sorted.
func ClientNames() []string {
	names := make([]string, 0, len(clientConfigs))
	for n := range clientConfigs {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// PrintConfig is the configuration snippet that makes client start
// command (the program and its arguments, e.g. aimi mcp --socket S), and
// a note of where it goes.
func PrintConfig(client string, command []string) (snippet, where string, err error) {
	c, ok := clientConfigs[client]
	if !ok {
		return "", "", fmt.Errorf("--print-config %q: not a client aimi knows; use one of %s", client, strings.Join(ClientNames(), ", "))
	}
	where = "put this in " + c.file
	if c.add != "" {
		where += "; or run: " + c.add + shellJoin(command)
	}
	return c.snippet(command), where, nil
}

// shellJoin quotes the words that need it for a POSIX shell.
func shellJoin(words []string) string {
	out := make([]string, len(words))
	for i, w := range words {
		if w != "" && strings.Trim(w, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:@") == "" {
			out[i] = w
		} else {
			out[i] = "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
		}
	}
	return strings.Join(out, " ")
}
