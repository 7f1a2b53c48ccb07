package docker

import (
	"context"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/legorl/legorl/sandbox"
)

// TestMetrics creates a real container sandbox on a backend with metrics,
// runs a command, closes the sandbox and runs one more, and compares the
// counters, labelled backend="docker", with what happened.
func TestMetrics(t *testing.T) {
	opts := testBackend(t).opts // the test engine, or fail
	reg := prometheus.NewRegistry()
	opts.Metrics = sandbox.NewMetrics(reg)
	b, err := New(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	sb, err := b.Create(context.Background(), sandbox.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	run(t, sb, sh("exit 4"))
	sb.Close()
	sb.Close()
	sb.Exec(context.Background(), sh("true")) // closed: sandbox_crash
	want := `
# HELP legorl_sandbox_created_total Sandboxes created, by backend.
# TYPE legorl_sandbox_created_total counter
legorl_sandbox_created_total{backend="docker"} 1
# HELP legorl_sandbox_execs_total Commands run by Exec, by backend and outcome (completed, timeout, resource_limit, sandbox_crash, or error).
# TYPE legorl_sandbox_execs_total counter
legorl_sandbox_execs_total{backend="docker",outcome="completed"} 1
legorl_sandbox_execs_total{backend="docker",outcome="sandbox_crash"} 1
# HELP legorl_sandbox_live Sandboxes created and not yet closed, by backend.
# TYPE legorl_sandbox_live gauge
legorl_sandbox_live{backend="docker"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want),
		"legorl_sandbox_created_total", "legorl_sandbox_execs_total", "legorl_sandbox_live"); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(reg, "legorl_sandbox_exec_duration_seconds"); n != 1 {
		t.Errorf("%d exec duration series, want 1", n)
	}
}
