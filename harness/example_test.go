package harness_test

import (
	"fmt"

	"github.com/legorl/legorl/harness"
)

// The command line of the bash agent for one rollout: the runner shows
// legorl-agent inside the sandbox and serves the proxy at BaseURL.
func ExampleLookup() {
	h, err := harness.Lookup("bash")
	if err != nil {
		panic(err)
	}
	l, err := h.Command(harness.Env{
		BaseURL: "http://127.0.0.1:40001/rollout/r1/v1", Model: "legorl",
		TaskFile: "/legorl/harness/task.md", Workspace: "/workspace", MaxTurns: 20,
		AgentPath: "/legorl/bin/legorl-agent",
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(h.Name(), h.WireAPI())
	fmt.Println(l.Cmd.Args)
	// Output:
	// bash chat/completions
	// [/legorl/bin/legorl-agent bash --base-url http://127.0.0.1:40001/rollout/r1/v1 --task-file /legorl/harness/task.md --workdir /workspace --model legorl --max-turns 20]
}
