// Package archtest holds the project's architecture test: the layer table of
// docs/ARCHITECTURE.md as code, and a test that fails when a package imports
// one it may not (an import pointing up the layer list).
package archtest

// Layers lists the top-level packages from the bottom of the stack up, with
// the packages each may import directly. What a package's allowed packages
// may import, it may import too (the closure), so the list only names the
// edges of DESIGN.md §5. Every folder with Go code must be listed (its
// subpackages belong to it).
var Layers = []Layer{
	{"text", nil}, // one-line error text, used by every layer
	{"schemas", []string{"text"}},
	{"storage", []string{"schemas"}},
	{"tasks", []string{"schemas"}},
	{"policy", []string{"schemas"}},
	{"sandbox", []string{"tasks"}},
	{"proxy", []string{"policy", "schemas", "sandbox"}}, // sandbox: Listen, to serve inside a sandbox
	{"harness", []string{"sandbox"}},
	{"rollout", []string{"schemas", "storage", "tasks", "policy", "sandbox", "proxy", "harness"}},
	{"transforms", []string{"rollout"}},
	{"pipelines", []string{"transforms"}},
	{"trainer", []string{"policy", "storage", "schemas"}},
	{"loop", []string{"pipelines", "trainer"}},
	{"monitor", []string{"storage", "schemas", "policy"}}, // policy: checkpoint headers and safetensors, never the trainer
	{"cmd", []string{"loop", "monitor"}},
	{"internal", []string{"cmd"}}, // test-only helpers; may look at everything
}

// Forbidden lists imports that the layer table allows but the design does
// not: a consumer of a contract package must not import an implementation
// of it. From and To are package paths under the module (a path covers its
// subpackages); only non-test imports count (tests may build the real
// thing).
var Forbidden = []Edge{
	// The proxy consumes the generation contract (policy/infer), whichever
	// engine implements it.
	{"proxy", "policy/engine", "the proxy consumes policy/infer"},
	// The vLLM/SGLang adapters implement the contract beside the engine.
	{"policy/remote", "policy/engine", "the remote adapters implement policy/infer"},
	// Checkpoint headers come from policy/checkpoint; the rollout side
	// never needs the trainer.
	{"proxy", "trainer", "read checkpoint headers with policy/checkpoint"},
	{"rollout", "trainer", "read checkpoint headers with policy/checkpoint"},
	{"transforms", "trainer", "read checkpoint headers with policy/checkpoint"},
}

// Edge is one forbidden import and why.
type Edge struct{ From, To, Why string }

// Layer is one top-level package and the packages it may import directly.
type Layer struct {
	Name    string
	Imports []string
}

// Allowed returns, for each layer, every top-level package it may import:
// its own tree and the closure of its declared imports. Declared imports
// must name layers listed before it, so the graph has no cycles.
func Allowed(layers []Layer) (map[string]map[string]bool, error) {
	out := map[string]map[string]bool{}
	for _, l := range layers {
		set := map[string]bool{l.Name: true}
		for _, imp := range l.Imports {
			below, ok := out[imp]
			if !ok {
				return nil, &orderError{l.Name, imp}
			}
			for k := range below {
				set[k] = true
			}
		}
		out[l.Name] = set
	}
	return out, nil
}

type orderError struct{ layer, imp string }

func (e *orderError) Error() string {
	return "archtest: layer " + e.layer + " imports " + e.imp + ", which is not listed before it"
}
