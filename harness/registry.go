package harness

import (
	"fmt"
	"sort"
	"strings"
)

// registry lists every harness by name. The built-in agents come first;
// the adapters of the npm programs (Claude Code, OpenCode, Codex, pi,
// qwen-code: one file each in this package, each pinned to a version)
// are added here.
func registry() map[string]Harness {
	return map[string]Harness{
		"bash":     Bash(),
		"tools":    Tools(),
		"pi":       Pi{},
		"codex":    Codex{},
		"opencode": OpenCode{},
		"claude":   ClaudeCode{},
		"qwen":     QwenCode{},
	}
}

// Lookup returns the harness named name.
func Lookup(name string) (Harness, error) {
	h, ok := registry()[name]
	if !ok {
		return nil, fmt.Errorf("%w %q (known: %s)", ErrUnknown, name, strings.Join(Names(), ", "))
	}
	return h, nil
}

// Names lists the known harnesses, sorted.
func Names() []string {
	var out []string
	for n := range registry() {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}
