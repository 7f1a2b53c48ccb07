// Command legorl-agent runs one of the built-in coding agents (package
// harness/agent) inside a sandbox, against a model server that speaks
// OpenAI Chat Completions (the proxy):
//
//	legorl-agent bash  --base-url URL --task-file FILE [--model M] [--max-turns N] [flags]
//	legorl-agent tools --base-url URL --task-file FILE [--model M] [--max-turns N] [flags]
//
// It prints one JSON line (agent.Result) as the last line of its standard
// output. Build it static so that it runs in any sandbox image:
//
//	CGO_ENABLED=0 go build -o bin/legorl-agent ./cmd/legorl-agent
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/legorl/legorl/harness/agent"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := agent.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
