package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/legorl/legorl/tasks/builtin"
)

// The cluster test's hosts: network namespaces on one bridge, each with
// its own address and loopback and no route elsewhere. clusterNet is a
// private range used only inside namespaces the test makes.
const clusterNet = "10.231.0."

type clusterHost struct {
	name string // short name: store, jobs, w1, ...
	ns   string // the namespace
	ip   string
}

// cluster is a test topology of network namespaces and the processes
// started in them; stop tears every process and namespace down.
type cluster struct {
	t      *testing.T
	prefix string
	hosts  map[string]*clusterHost
	env    []string // S3 endpoint and keys, for every legorl process

	mu      sync.Mutex
	procs   []*exec.Cmd
	servers map[string]*exec.Cmd // the legorl server of each host
	done    bool                 // torn down: the test log no longer takes lines
}

// TestCluster is `make test-cluster`: the production topology on hosts of
// the test's own, network namespaces joined by a bridge: a store host
// (MinIO), a job-server host (Prism, `legorl beam job-server --listen
// --expose`), two worker hosts (`legorl beam worker-pool`, each with its
// local sandbox backend) and a trainer host. From the trainer host:
//
//   - two RL iterations of the bash agent: iteration 0's rollouts on the
//     first worker host and the update on the trainer host, iteration 1's
//     rollouts with the new checkpoint on the second worker host and its
//     update;
//   - iteration 2's rollouts with the store host cut off the network for
//     10 s: the iteration completes, at once or when run again;
//   - iteration 3's rollouts with the first worker host killed
//     mid-iteration: the same command on the second worker host finishes
//     it;
//   - an audit of the whole run in MinIO: every file against its manifest,
//     every rollout once, the recorded logprobs against the trainer's.
//
// Generation runs in the workers' embedded engines: the inference host is
// not part of it yet (docs/DEPLOY.md). Every process and namespace is torn
// down when the test ends, failed or not; namespaces left by a killed run
// are removed at the next start.
//
// It needs root, iproute2, nsenter and curl; LEGORL_TEST_CLUSTER=1 turns it on
// (and a missing prerequisite then fails it).
func TestCluster(t *testing.T) {
	if os.Getenv("LEGORL_TEST_CLUSTER") == "" {
		t.Skip("LEGORL_TEST_CLUSTER=1 runs it (make test-cluster)")
	}
	need := func(ok bool, what string) {
		if !ok {
			t.Fatalf("the cluster test needs %s", what)
		}
	}
	need(os.Geteuid() == 0, "root (network namespaces)")
	_, err := exec.LookPath("ip")
	need(err == nil, "ip (iproute2)")
	_, err = exec.LookPath("curl")
	need(err == nil, "curl (readiness checks inside the namespaces)")
	// nsenter enters only the network namespace: ip netns exec would also
	// remount /sys, hiding the cgroup hierarchy the sandboxes use.
	_, err = exec.LookPath("nsenter")
	need(err == nil, "nsenter (util-linux)")
	// The store host runs MinIO; LEGORL_TEST_CLUSTER=versitygw runs
	// versitygw instead (make tools installs it; MinIO takes 15 minutes
	// to build the first time).
	kind, env, bin := "minio", "LEGORL_MINIO", filepath.Join("..", "..", ".cache", "bin", "minio")
	if os.Getenv("LEGORL_TEST_CLUSTER") == "versitygw" {
		kind, env, bin = "versitygw", "LEGORL_VERSITYGW", filepath.Join("..", "..", ".cache", "bin", "versitygw")
	}
	if p := os.Getenv(env); p != "" {
		bin = p
	}
	_, err = os.Stat(bin)
	need(err == nil, kind+" at "+bin+": make test-cluster builds MinIO into .cache/bin, or set "+env)
	bin, _ = filepath.Abs(bin)

	start := time.Now()
	c := newCluster(t, "store", "jobs", "w1", "w2", "trainer")
	dir := t.TempDir()
	os.Chmod(dir, 0o755)

	// The store host: MinIO (one drive) or versitygw (posix).
	const access, secret = "legorl-cluster", "legorl-cluster-secret"
	store := c.hosts["store"]
	data := filepath.Join(dir, "s3")
	os.Mkdir(data, 0o755)
	if kind == "minio" {
		c.start(store, nil, []string{"MINIO_ROOT_USER=" + access, "MINIO_ROOT_PASSWORD=" + secret, "MINIO_BROWSER=off", "MINIO_UPDATE=off", "MINIO_CI_CD=on"},
			bin, "server", "--address", store.ip+":9000", "--quiet", data)
		c.waitHTTP(c.hosts["trainer"], "http://"+store.ip+":9000/minio/health/ready", "-sf")
	} else {
		c.start(store, nil, nil, bin, "--access", access, "--secret", secret, "--port", store.ip+":9000", "--quiet", "posix", data)
		c.waitHTTP(c.hosts["trainer"], "http://"+store.ip+":9000/", "-s") // 403 to an unsigned request
	}
	c.env = []string{"LEGORL_S3_ENDPOINT=http://" + store.ip + ":9000", "AWS_ACCESS_KEY_ID=" + access, "AWS_SECRET_ACCESS_KEY=" + secret}

	// The job server and the two worker pools, each on its host's address.
	jobs := c.legorlServer(c.hosts["jobs"], "beam", "job-server", "--listen", c.hosts["jobs"].ip+":8099", "--expose")
	pools := map[string]string{}
	for _, w := range []string{"w1", "w2"} {
		pools[w] = c.legorlServer(c.hosts[w], "beam", "worker-pool", "--listen", c.hosts[w].ip+":50000", "--expose", "--job-server", jobs)
	}
	t.Logf("hosts up in %s: job server %s, worker pools %v", time.Since(start).Round(time.Millisecond), jobs, pools)

	suite := filepath.Join(dir, "suite")
	if _, err := builtin.Generate(context.Background(), suite, builtin.Options{N: 2, Seed: 6, Languages: []string{"python"}}); err != nil {
		t.Fatal(err)
	}
	policy := testPolicy(t)
	self, _ := os.Executable()
	const bucket = "s3://legorl-cluster/runs"
	trainer := c.hosts["trainer"]
	policies := []string{policy}
	for it, w := range []string{"w1", "w2"} {
		iter := fmt.Sprint(it)
		t0 := time.Now()
		out := c.legorl(trainer, "rollout", "--tasks", suite, "--harness", "bash", "--policy", policies[it], "--group", "2",
			"--store", bucket, "--split", "sft,train,heldout,heldout_family", "--run", "cluster", "--iteration", iter,
			"--max-turns", "2", "--max-tokens", "16", "--agent", self,
			"--runner", "universal", "--endpoint", jobs, "--environment-type", "EXTERNAL", "--environment-config", pools[w])
		t.Logf("iteration %d rollouts on %s: %s", it, w, strings.TrimSpace(out))
		if !strings.Contains(out, "launched 4, completed 4, masked 0") || !strings.Contains(out, "manifest v1") {
			rows := c.legorl(trainer, "export", "--store", bucket, "--run", "cluster", "--table", "rollouts")
			t.Fatalf("iteration %d rollouts on %s: %q; rows:\n%s", it, w, out, rows)
		}
		next := filepath.Join(dir, "policy-"+fmt.Sprint(it+1))
		out = c.legorl(trainer, "train", "--store", bucket, "--run", "cluster", "--iteration", iter, "--policy", policies[it], "--out", next)
		if want := fmt.Sprintf("policy v%d -> v%d", it, it+1); !strings.Contains(out, want) {
			t.Fatalf("iteration %d update: %q, want %q", it, out, want)
		}
		policies = append(policies, next)
		t.Logf("iteration %d: rollouts on %s and the update on the trainer host in %s", it, w, time.Since(t0).Round(time.Millisecond))
	}

	// A fault across hosts: the store host cut off the network for 10 s
	// while iteration 2's rollouts run on w1, from the moment the first
	// group's claim is in the store (the other group's files and the
	// manifest commit come after every claim). Puts retry, but opening the
	// store (the commit step opens it) gives up after 10 s, so the
	// iteration may fail; the same command run again once the store is
	// back must then finish it, reusing the claimed groups, and the audit
	// below must find every file whole and listed once.
	it2 := []string{"rollout", "--tasks", suite, "--harness", "bash", "--policy", policies[2], "--group", "2",
		"--store", bucket, "--split", "sft,train,heldout,heldout_family", "--run", "cluster", "--iteration", "2",
		"--max-turns", "2", "--max-tokens", "16", "--agent", self,
		"--runner", "universal", "--endpoint", jobs, "--environment-type", "EXTERNAL", "--environment-config", pools["w1"]}
	done := make(chan string, 1)
	go func() { done <- c.legorlErr(trainer, it2...) }()
	waitPath(t, data, "claims/rollout/iter-000002/", done)
	c.ip("-n", store.ns, "link", "set", "eth0", "down")
	time.Sleep(10 * time.Second)
	c.ip("-n", store.ns, "link", "set", "eth0", "up")
	out := <-done
	t.Logf("iteration 2 with the store cut off for 10 s: %.300s", strings.TrimSpace(out))
	if !strings.Contains(out, "manifest v1") {
		if !strings.Contains(out, store.ip+":9000") {
			t.Fatalf("iteration 2 failed, and not for the store: %.2000s", out)
		}
		out = c.legorl(trainer, it2...)
		t.Logf("iteration 2 run again with the store back: %s", strings.TrimSpace(out))
	}
	if !strings.Contains(out, "launched 4, completed 4, masked 0") || !strings.Contains(out, "manifest v1") {
		t.Errorf("iteration 2 with the store cut off: %q", out)
	}

	// A worker host killed mid-iteration: w1's worker pool gets SIGKILL
	// once iteration 3's first claim is in the store. Prism runs a job's
	// bundles on the one worker it started and does not move them, so the
	// job fails; the same command pointed at w2 then finishes the
	// iteration, reusing the claimed group (or the iteration was done
	// before the kill: the test says which).
	it3 := append([]string(nil), it2...)
	it3[slices.Index(it3, "--iteration")+1] = "3"
	go func() { done <- c.legorlErr(trainer, it3...) }()
	waitPath(t, data, "claims/rollout/iter-000003/", done)
	c.kill("w1")
	out = <-done
	if strings.Contains(out, "manifest v1") {
		t.Logf("iteration 3 was committed before w1 was killed: %s", strings.TrimSpace(out))
	} else {
		t.Logf("iteration 3 with w1 killed: %.300s", strings.TrimSpace(out))
		it3[len(it3)-1] = pools["w2"]
		out = c.legorl(trainer, it3...)
		t.Logf("iteration 3 run again on w2: %s", strings.TrimSpace(out))
		if !regexp.MustCompile(`reused [1-9]`).MatchString(out) { // w1 may have claimed any number of groups before the kill
			t.Errorf("iteration 3 on w2 reused no group claimed on w1: %q", out)
		}
	}
	if !strings.Contains(out, "launched 4, completed 4, masked 0") || !strings.Contains(out, "manifest v1") {
		t.Errorf("iteration 3: %q", out)
	}

	out = c.legorl(trainer, "export", "--store", bucket, "--run", "cluster", "--table", "rollouts")
	if n := strings.Count(out, `"run_id":"cluster"`); n != 16 {
		t.Errorf("%d rollout rows in the store, want 16 (4 iterations x 2 tasks x 2), each once", n)
	}
	out = c.legorl(trainer, "audit", "--store", bucket, "--run", "cluster", "--checkpoints", strings.Join(policies, ","))
	for _, want := range []string{"every check passed", "ok   logprobs   iteration 0, version 0", "ok   logprobs   iteration 1, version 1", "ok   logprobs   iteration 2, version 2", "ok   logprobs   iteration 3, version 2"} {
		if !strings.Contains(out, want) {
			t.Errorf("audit: %q lacks %q", out, want)
		}
	}
	t.Logf("the whole test, the store on %s: %s (wall, setup included)", kind, time.Since(start).Round(time.Second))
}

// newCluster makes a bridge namespace and one namespace per host, each
// host on the bridge with its own address, and registers the teardown.
func newCluster(t *testing.T, hosts ...string) *cluster {
	removeStaleClusters(t)
	c := &cluster{t: t, prefix: fmt.Sprintf("legorl-cluster-%d", os.Getpid()), hosts: map[string]*clusterHost{}, servers: map[string]*exec.Cmd{}}
	t.Cleanup(c.stop)
	sw := c.prefix + "-sw"
	c.ip("netns", "add", sw)
	c.ip("-n", sw, "link", "add", "br0", "type", "bridge")
	c.ip("-n", sw, "link", "set", "br0", "up")
	for i, name := range hosts {
		h := &clusterHost{name: name, ns: c.prefix + "-" + name, ip: fmt.Sprintf("%s%d", clusterNet, i+2)}
		c.hosts[name] = h
		port := fmt.Sprintf("p%d", i)
		c.ip("netns", "add", h.ns)
		c.ip("-n", sw, "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", h.ns)
		c.ip("-n", sw, "link", "set", port, "master", "br0")
		c.ip("-n", sw, "link", "set", port, "up")
		c.ip("-n", h.ns, "addr", "add", h.ip+"/24", "dev", "eth0")
		c.ip("-n", h.ns, "link", "set", "eth0", "up")
		c.ip("-n", h.ns, "link", "set", "lo", "up")
	}
	return c
}

// removeStaleClusters deletes the namespaces of cluster tests whose
// process is gone (a run killed before its cleanup).
func removeStaleClusters(t *testing.T) {
	out, _ := exec.Command("ip", "netns", "list").Output()
	for _, l := range strings.Split(string(out), "\n") {
		f := strings.Fields(l)
		if len(f) == 0 || !strings.HasPrefix(f[0], "legorl-cluster-") {
			continue
		}
		var pid int
		if _, err := fmt.Sscanf(strings.TrimPrefix(f[0], "legorl-cluster-"), "%d", &pid); err != nil {
			continue
		}
		if syscall.Kill(pid, 0) == syscall.ESRCH {
			t.Logf("removing %s, left by a killed run", f[0])
			exec.Command("ip", "netns", "del", f[0]).Run()
		}
	}
}

func (c *cluster) ip(args ...string) {
	c.t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		c.t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
	}
}

// start runs argv in host's namespace in the background; its stderr goes
// to the test log, and its stdout too unless stdout is not nil.
func (c *cluster) start(h *clusterHost, stdout io.Writer, env []string, argv ...string) *exec.Cmd {
	c.t.Helper()
	cmd := exec.Command("nsenter", append([]string{"--net=/run/netns/" + h.ns}, argv...)...)
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	log := &testLog{c: c, prefix: h.name + ": "}
	if stdout == nil {
		stdout = log
	}
	cmd.Stdout, cmd.Stderr = stdout, log
	if err := cmd.Start(); err != nil {
		c.t.Fatalf("%s: start %s: %v", h.name, argv[0], err)
	}
	c.mu.Lock()
	c.procs = append(c.procs, cmd)
	c.mu.Unlock()
	return cmd
}

// legorlEnv is the environment that makes the test binary run legorl ARGS.
func (c *cluster) legorlEnv(args []string) []string {
	return append([]string{"LEGORL_TEST_RUN_MAIN=1", "LEGORL_TEST_ARGS=" + strings.Join(args, " ")}, c.env...)
}

// legorlServer starts `legorl ARGS` on host h and returns the endpoint its
// first line names ("... at ENDPOINT").
func (c *cluster) legorlServer(h *clusterHost, args ...string) string {
	c.t.Helper()
	self, _ := os.Executable()
	pr, pw := io.Pipe()
	cmd := c.start(h, pw, c.legorlEnv(args), self)
	c.mu.Lock()
	c.servers[h.name] = cmd
	c.mu.Unlock()
	log := &testLog{c: c, prefix: h.name + ": "}
	line := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		first := true
		for sc.Scan() {
			if first {
				line <- sc.Text()
				first = false
			}
			log.Write([]byte(sc.Text() + "\n"))
		}
	}()
	select {
	case l := <-line:
		_, ep, ok := strings.Cut(l, " at ")
		if !ok {
			c.t.Fatalf("%s: legorl %s: first line %q", h.name, args[0], l)
		}
		return ep
	case <-time.After(2 * time.Minute):
		c.t.Fatalf("%s: legorl %s printed no endpoint within 2 minutes", h.name, strings.Join(args, " "))
	}
	return ""
}

// legorl runs `legorl ARGS` on host h to the end and returns its stdout;
// a non-zero exit fails the test.
func (c *cluster) legorl(h *clusterHost, args ...string) string {
	c.t.Helper()
	out, err := c.run(h, args...)
	if err != nil {
		c.t.Fatalf("%s: %v", h.name, err)
	}
	return out
}

// waitPath waits until a file or folder whose path contains part appears
// under dir (the store's data), failing if done delivers first.
func waitPath(t *testing.T, dir, part string, done chan string) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		found := false
		filepath.WalkDir(dir, func(p string, _ os.DirEntry, _ error) error {
			if strings.Contains(p, part) {
				found = true
				return filepath.SkipAll
			}
			return nil
		})
		if found {
			return
		}
		select {
		case out := <-done:
			t.Fatalf("the command ended before %s appeared in the store: %s", part, out)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not appear in the store within 2 minutes", part)
		}
	}
}

// legorlErr is legorl for a goroutine, which may not fail the test: it
// returns the error as the output.
func (c *cluster) legorlErr(h *clusterHost, args ...string) string {
	out, err := c.run(h, args...)
	if err != nil {
		return err.Error()
	}
	return out
}

// run runs `legorl ARGS` on host h to the end: its stdout, or an error
// with its stderr.
func (c *cluster) run(h *clusterHost, args ...string) (string, error) {
	self, _ := os.Executable()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "nsenter", "--net=/run/netns/"+h.ns, self)
	cmd.Env = append(os.Environ(), c.legorlEnv(args)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("legorl %s: %v: %s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out), nil
}

// waitHTTP waits until curl with flags ("-s": any answer, "-sf": a 2xx)
// gets url from host h.
func (c *cluster) waitHTTP(h *clusterHost, url, flags string) {
	c.t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for exec.Command("nsenter", "--net=/run/netns/"+h.ns, "curl", flags, "-o", "/dev/null", url).Run() != nil {
		if time.Now().After(deadline) {
			c.t.Fatalf("%s does not answer from %s within 2 minutes", url, h.name)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// kill sends SIGKILL to host name's legorl server and its process group.
func (c *cluster) kill(name string) {
	c.mu.Lock()
	cmd := c.servers[name]
	c.mu.Unlock()
	syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
}

// stop kills every process the cluster started (their process groups)
// and deletes its namespaces.
func (c *cluster) stop() {
	c.mu.Lock()
	procs := c.procs
	c.procs = nil
	c.mu.Unlock()
	for _, p := range procs {
		if p.Process != nil {
			syscall.Kill(-p.Process.Pid, syscall.SIGKILL)
			p.Wait()
		}
	}
	c.mu.Lock()
	c.done = true
	c.mu.Unlock()
	for _, h := range c.hosts {
		exec.Command("ip", "netns", "del", h.ns).Run()
	}
	exec.Command("ip", "netns", "del", c.prefix+"-sw").Run()
	out, _ := exec.Command("ip", "netns", "list").Output()
	if strings.Contains(string(out), c.prefix) {
		c.t.Errorf("namespaces left after teardown: %s", out)
	}
}

// testLog writes each line to the test log until the cluster is torn
// down.
type testLog struct {
	c      *cluster
	prefix string
	mu     sync.Mutex
	buf    []byte
}

func (l *testLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, p...)
	for {
		i := strings.IndexByte(string(l.buf), '\n')
		if i < 0 {
			break
		}
		l.c.mu.Lock()
		if !l.c.done {
			l.c.t.Log(l.prefix + string(l.buf[:i]))
		}
		l.c.mu.Unlock()
		l.buf = l.buf[i+1:]
	}
	return len(p), nil
}
