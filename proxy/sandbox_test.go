//go:build linux

package proxy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/legorl/legorl/sandbox"
	"github.com/legorl/legorl/sandbox/local"
	"github.com/legorl/legorl/sandbox/local/localtest"
	"github.com/legorl/legorl/sandbox/sandboxtest"
)

// sandboxClient is run by python3 inside the sandbox: it calls the proxy on
// the sandbox's loopback, prints the reply's content, then tries the host's
// own loopback listener and prints whether it was reachable.
const sandboxClient = `
import json, sys, urllib.request
port, host_port = sys.argv[1], sys.argv[2]
body = json.dumps({"model": "tiny", "messages": [{"role": "user", "content": "hello from the sandbox"}]}).encode()
req = urllib.request.Request("http://127.0.0.1:%s/rollout/r1/v1/chat/completions" % port, data=body,
                             headers={"Content-Type": "application/json"})
reply = json.load(urllib.request.urlopen(req, timeout=20))
print("content:", reply["choices"][0]["message"]["content"])
try:
    urllib.request.urlopen("http://127.0.0.1:%s/rollout/r1/v1/models" % host_port, timeout=3)
    print("host: reachable")
except Exception as e:
    print("host: unreachable", type(e).__name__)
`

// TestServeInSandbox serves the proxy on a listener inside a local
// sandbox's network namespace: a program in the sandbox reaches it at
// 127.0.0.1, and does not reach the proxy's listener on the host's own
// loopback.
func TestServeInSandbox(t *testing.T) {
	tok := testTokenizer(t)
	gen := newScripted(t, tok, "Hi, sandbox.<|im_end|>")
	p, hostSrv := testProxy(t, gen)
	ctx := context.Background()
	b := local.New(local.Options{InitPath: localtest.Init(t)})
	t.Cleanup(func() { b.Close() })
	sb, err := b.Create(ctx, sandbox.Spec{Workspace: sandboxtest.Workspace(t)})
	if errors.Is(err, sandbox.ErrUnsupported) {
		t.Skipf("no local sandbox on this machine: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Close() })
	l, err := sb.Listen(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: p, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	port := l.Addr().(*net.TCPAddr).Port
	hostPort := hostSrv.Listener.Addr().(*net.TCPAddr).Port
	if r := do(t, "GET", hostSrv.URL+"/rollout/r1/v1/models", ""); r.status != 200 {
		t.Fatalf("the host listener does not answer on the host: %d", r.status)
	}

	res, err := sb.Exec(ctx, sandbox.Cmd{Args: []string{"python3", "-c", sandboxClient, fmt.Sprint(port), fmt.Sprint(hostPort)}, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	out := string(res.Stdout)
	if res.Outcome != sandbox.OutcomeCompleted || res.ExitCode != 0 {
		t.Fatalf("python3 in the sandbox: %s exit %d\nstdout %s\nstderr %s", res.Outcome, res.ExitCode, out, res.Stderr)
	}
	if !strings.Contains(out, "content: Hi, sandbox.") {
		t.Errorf("reply in the sandbox: %s", out)
	}
	if !strings.Contains(out, "host: unreachable") {
		t.Errorf("the host's loopback listener was reachable from the sandbox: %s", out)
	}
	rec := finish(t, p, "r1")
	if len(rec.Segments) != 1 || rec.Metrics.Calls != 1 {
		t.Errorf("recorded %d segments, %d calls", len(rec.Segments), rec.Metrics.Calls)
	}
	if got := decode(t, tok, rec.Segments[0].PromptTokenIDs); !strings.Contains(got, "hello from the sandbox") {
		t.Errorf("recorded prompt %q", got)
	}
}
