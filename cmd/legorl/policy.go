package main

import (
	"errors"
	"flag"
	"fmt"
	"strings"

	"github.com/legorl/legorl/rollout"
)

// templateNames are the chat templates --template names.
var templateNames = strings.Join(rollout.Templates(), " or ")

// remoteFlags are --remote and --remote-url; they mean the same on every
// command that generates (serve, rollout, eval).
type remoteFlags struct{ kind, url *string }

func addRemoteFlags(fs *flag.FlagSet) remoteFlags {
	return remoteFlags{
		kind: fs.String("remote", "", "generate on a remote engine instead of the embedded one: vllm or sglang (--policy still gives the tokenizer)"),
		url:  fs.String("remote-url", "", "base URL of the remote engine (with --remote), e.g. http://gpu-host:8000"),
	}
}

// value checks the flags and returns the remote engine they name (a zero
// Kind: the embedded engine).
func (r remoteFlags) value() (rollout.Remote, error) {
	switch *r.kind {
	case "":
		if *r.url != "" {
			return rollout.Remote{}, errors.New("--remote-url needs --remote vllm or sglang")
		}
		return rollout.Remote{}, nil
	case rollout.RemoteVLLM, rollout.RemoteSGLang:
		if *r.url == "" {
			return rollout.Remote{}, fmt.Errorf("--remote %s needs --remote-url", *r.kind)
		}
		return rollout.Remote{Kind: *r.kind, URL: *r.url}, nil
	}
	return rollout.Remote{}, fmt.Errorf("unknown --remote %q: want vllm or sglang", *r.kind)
}

// warn prints a runtime's warnings about its policy.
func warn(rt *rollout.Runtime, cmd string, stderr interface{ Write([]byte) (int, error) }) {
	for _, w := range rt.Warnings {
		fmt.Fprintf(stderr, "legorl %s: warning: %s\n", cmd, w)
	}
}

// checkTemplate checks --template.
func checkTemplate(name string) error {
	if _, err := rollout.Template(name); err != nil {
		return fmt.Errorf("unknown --template %q: want %s", name, templateNames)
	}
	return nil
}
