// Command legorl is the one binary of the project: each subcommand lives in
// its own file and registers itself in the commands table.
//
// Every failure prints one line, "legorl SUBCOMMAND: what went wrong", to
// stderr and exits with status 2; success exits 0.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
)

// command is one subcommand.
type command struct {
	summary string
	run     func(ctx context.Context, env *environ, args []string, stdout, stderr io.Writer) error
}

// commands returns the subcommand table.
func commands() map[string]command {
	return map[string]command{
		"version":   {"print the version of legorl and of its data schema", runVersion},
		"export":    {"write a committed table of a run as JSON lines or CSV", runExport},
		"demo":      {"write a synthetic run to a store and read it back (the foundation demo)", runDemo},
		"tasks":     {"generate the built-in task suite, or validate a suite (gold passes, base fails)", runTasks},
		"tokenizer": {"encode, decode or train a byte-level BPE tokenizer.json", runTokenizer},
		"model":     {"initialise a Qwen3 checkpoint or score completions with one (logprobs, routing)", runModel},
		"sandbox":   {"run a command in a fresh sandbox (exec), or grade a diff against hidden tests (grade)", runSandbox},
		"serve":     {"serve the policy over OpenAI and Anthropic APIs (engine + proxy), recording what it generates", runServe},
		"audit":     {"re-verify a stored run: file hashes, rows, schemas, checkpoint lineage, recomputed logprobs", runAudit},
		"compare":   {"the paired change of pass@1 between two stored evals of the same tasks, with its 95% interval and McNemar's test", runCompare},
		"eval":      {"pass@1 (and pass@k) of a policy per harness on held-out tasks, as a Beam pipeline", runEval},
		"beam":      {"a Prism job server or an SDK worker pool, for pipelines spread over processes or machines", runBeam},
		"rollout":   {"run agent episodes against a policy checkpoint: one task (--task), or a suite, G per task, as a Beam pipeline", runRollout},
		"sft":       {"supervised warm start on demonstrations (sft), or write the scripted solver's demonstrations (sft demos)", runSFT},
		"run":       {"the RL loop of a config: rollouts -> update -> publish -> eval, resumable; the embedded demo without --config", runLoop},
		"train":     {"one policy update from an iteration's stored rollouts, published as the next checkpoint", runTrain},
		"monitor":   {"serve the live dashboard of a store's runs (reward, failures, tool use, logprobs, trajectories)", runMonitor},
	}
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code, worker := beamWorker(ctx, readEnviron(os.Getenv), os.Args[1:], os.Stderr) // started by a Beam job server
	if !worker {
		code = run(ctx, readEnviron(os.Getenv), os.Args[1:], os.Stdout, os.Stderr)
	}
	stop()
	os.Exit(code)
}

// run executes one command line and returns the exit status.
func run(ctx context.Context, env *environ, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stdout)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	name := args[0]
	cmd, ok := commands()[name]
	if !ok {
		fmt.Fprintf(stderr, "legorl: unknown command %q (run legorl help for the list)\n", name)
		return 2
	}
	err := cmd.run(ctx, env, args[1:], stdout, stderr)
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	default:
		fmt.Fprintf(stderr, "legorl %s: %s\n", name, oneLine(err.Error()))
		return 2
	}
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "legorl: harness-native reinforcement learning for coding agents")
	fmt.Fprintln(w, "\nusage: legorl COMMAND [flags]    (legorl COMMAND -h for its flags)")
	fmt.Fprintln(w, "\ncommands:")
	cmds := commands()
	names := make([]string, 0, len(cmds))
	for n := range cmds {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-10s %s\n", n, cmds[n].summary)
	}
}

// newFlags returns a flag set whose errors come back to run as one line;
// usage is printed only for -h.
func newFlags(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("legorl "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

func printUsage(fs *flag.FlagSet, stderr io.Writer) {
	fmt.Fprintf(stderr, "usage: %s [flags]\n\nflags:\n", fs.Name())
	fs.SetOutput(stderr)
	fs.PrintDefaults()
	fs.SetOutput(io.Discard)
}

// parseFlags parses args and refuses stray positional arguments.
func parseFlags(fs *flag.FlagSet, stderr io.Writer, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printUsage(fs, stderr)
			return err
		}
		return fmt.Errorf("%v (see %s -h)", err, fs.Name())
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q (see %s -h)", fs.Arg(0), fs.Name())
	}
	return nil
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
