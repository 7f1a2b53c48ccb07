package docker_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/legorl/legorl/sandbox"
	"github.com/legorl/legorl/sandbox/docker"
)

// Run one command in a fresh container sandbox over a task folder. Needs a
// Docker Engine with the base image (scripts/docker/start-dockerd.sh and
// scripts/docker/base-image.sh), so it is compiled but not run by go test.
func Example() {
	ctx := context.Background()
	b, err := docker.New(ctx, docker.Options{Host: "unix:///var/run/docker.sock"})
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()
	sb, err := b.Create(ctx, sandbox.Spec{
		Workspace: "/path/to/task/repo",
		Limits:    sandbox.Limits{MemoryBytes: 1 << 30, Pids: 128, Timeout: time.Minute},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer sb.Close()
	res, err := sb.Exec(ctx, sandbox.Cmd{Args: []string{"python3", "-m", "pytest", "-q"}})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Outcome, res.ExitCode)
	fmt.Println("the agent's changes are in", sb.HostWorkspace())
}
