package grade_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/moby/moby/client"

	"github.com/legorl/legorl/sandbox"
	"github.com/legorl/legorl/sandbox/docker"
	"github.com/legorl/legorl/sandbox/grade"
	"github.com/legorl/legorl/sandbox/local"
	"github.com/legorl/legorl/sandbox/local/localtest"
	"github.com/legorl/legorl/tasks"
	"github.com/legorl/legorl/tasks/builtin"
)

// suites are generated once per test binary.
var (
	suiteOnce sync.Once
	suiteDir  string
	suiteIns  []tasks.Instance
	suiteErr  error
	graderMu  sync.Mutex
	backends  = map[string]sandbox.Backend{}
	backErrs  = map[string]error{}
	graders   = map[string]*grade.Grader{}
)

// backendNames are the backends the Python grading and red-team tests run
// on, as subtests. Go tasks are graded on local only: go test needs a Go
// toolchain inside the sandbox, which the local backend shows from the
// host's /usr and the docker base image (scripts/docker/base-image.sh)
// does not have.
var backendNames = []string{"local", "docker"}

func TestMain(m *testing.M) {
	if os.Getenv(coldWorkerEnv) != "" {
		os.Exit(coldWorker()) // a child of this binary: the init is beside it
	}
	localtest.MustInstall()
	code := m.Run()
	if _, ok := backends["docker"]; ok && leftContainers() {
		code = 1
	}
	for _, b := range backends {
		if c, ok := b.(io.Closer); ok {
			c.Close()
		}
	}
	if suiteDir != "" {
		os.RemoveAll(suiteDir)
	}
	os.Exit(code)
}

// backend is the local backend with the init make build ships, which
// TestMain put beside this test binary, where the backend looks for it.
func backend() sandbox.Backend { return local.New(local.Options{}) }

// backendFor returns the shared backend of that name, created once. The
// docker one needs an engine with the base image, found through
// LEGORL_DOCKER_HOST (and LEGORL_DOCKER_IMAGE, default docker.DefaultImage);
// without it the test fails, as sandbox/docker's tests do.
func backendFor(t testing.TB, name string) sandbox.Backend {
	t.Helper()
	graderMu.Lock()
	defer graderMu.Unlock()
	if b, ok := backends[name]; ok {
		return b
	}
	if err, ok := backErrs[name]; ok {
		t.Fatal(err)
	}
	var b sandbox.Backend
	var err error
	switch name {
	case "local":
		b = backend()
	case "docker":
		b, err = newDocker()
	default:
		err = fmt.Errorf("unknown backend %q", name)
	}
	if err != nil {
		backErrs[name] = err
		t.Fatal(err)
	}
	backends[name] = b
	return b
}

// leftContainers reports (on stderr) any sandbox container this process
// left on the engine: every grade must remove its own.
func leftContainers() bool {
	cli, err := client.New(client.WithHost(os.Getenv("LEGORL_DOCKER_HOST")), client.WithAPIVersionNegotiation())
	if err != nil {
		fmt.Fprintf(os.Stderr, "grade: docker client: %v\n", err)
		return true
	}
	defer cli.Close()
	list, err := cli.ContainerList(context.Background(), client.ContainerListOptions{All: true,
		Filters: make(client.Filters).Add("label", docker.LabelKey+"="+docker.Owner())})
	if err != nil {
		fmt.Fprintf(os.Stderr, "grade: listing containers after the tests: %v\n", err)
		return true
	}
	for _, c := range list.Items {
		fmt.Fprintf(os.Stderr, "grade: container %s %v left behind by the tests\n", c.ID[:12], c.Names)
	}
	return len(list.Items) > 0
}

func newDocker() (sandbox.Backend, error) {
	host := os.Getenv("LEGORL_DOCKER_HOST")
	if host == "" {
		return nil, errors.New("LEGORL_DOCKER_HOST is not set: start an engine with scripts/docker/start-dockerd.sh " +
			"and build the image with scripts/docker/base-image.sh (make test does both)")
	}
	b, err := docker.New(context.Background(), docker.Options{Host: host, Image: os.Getenv("LEGORL_DOCKER_IMAGE")})
	if err != nil {
		return nil, err
	}
	return b, nil
}

// suite returns the shared generated suite: every template once, Python
// and Go.
func suite(t testing.TB) (string, []tasks.Instance) {
	t.Helper()
	suiteOnce.Do(func() {
		suiteDir, suiteErr = os.MkdirTemp("", "legorl-grade-suite-")
		if suiteErr != nil {
			return
		}
		py, err := builtin.Generate(context.Background(), filepath.Join(suiteDir, "py"), builtin.Options{N: 13, Seed: 3, Languages: []string{"python"}})
		if err != nil {
			suiteErr = err
			return
		}
		gl, err := builtin.Generate(context.Background(), filepath.Join(suiteDir, "go"), builtin.Options{N: 2, Seed: 4, Languages: []string{"go"}})
		if err != nil {
			suiteErr = err
			return
		}
		for i := range py {
			py[i].Snapshot = filepath.Join(suiteDir, "py", py[i].Snapshot)
		}
		for i := range gl {
			gl[i].Snapshot = filepath.Join(suiteDir, "go", gl[i].Snapshot)
		}
		suiteIns = append(py, gl...)
	})
	if suiteErr != nil {
		t.Fatal(suiteErr)
	}
	return suiteDir, suiteIns
}

// pick returns the first instance of a language (and family, if given).
func pick(t testing.TB, lang, family string) *tasks.Instance {
	t.Helper()
	_, ins := suite(t)
	for i := range ins {
		if ins[i].Language == lang && (family == "" || ins[i].Family == family) {
			in := ins[i]
			return &in
		}
	}
	t.Fatalf("no %s instance of family %q", lang, family)
	return nil
}

// grader returns the shared Grader over the local backend.
func grader(t testing.TB) *grade.Grader { return graderFor(t, "local") }

// graderFor returns the shared Grader over the named backend.
func graderFor(t testing.TB, name string) *grade.Grader {
	t.Helper()
	b := backendFor(t, name)
	graderMu.Lock()
	defer graderMu.Unlock()
	if graders[name] == nil {
		graders[name] = grade.New(b, grade.Options{})
	}
	return graders[name]
}

func mustGrade(t *testing.T, in *tasks.Instance, diff string) grade.Grade {
	t.Helper()
	return mustGradeWith(t, grader(t), in, diff)
}

func mustGradeWith(t *testing.T, gr *grade.Grader, in *tasks.Instance, diff string) grade.Grade {
	t.Helper()
	g, err := gr.Grade(context.Background(), "", in, diff)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: reward %v outcome %s flags %v (%.2fs setup, %.2fs tests) %s", in.InstanceID, g.Reward, g.Outcome, g.Flags, g.SetupSeconds, g.TestSeconds, g.Detail)
	return g
}

func TestGradeGoldAndBase(t *testing.T) {
	cases := []struct{ lang, backend string }{
		{"python", "local"}, {"python", "docker"},
		{"go", "local"}, // no Go toolchain in the docker base image
	}
	for _, c := range cases {
		t.Run(c.lang+"/"+c.backend, func(t *testing.T) {
			gr := graderFor(t, c.backend)
			in := pick(t, c.lang, "")
			gold := mustGradeWith(t, gr, in, in.Patch)
			if gold.Reward != 1 || gold.Outcome != sandbox.OutcomeCompleted || len(gold.F2PPassed) != len(in.FailToPass) || len(gold.P2PPassed) != len(in.PassToPass) {
				t.Fatalf("gold patch: %+v", gold)
			}
			base := mustGradeWith(t, gr, in, "")
			if base.Reward != 0 || base.Outcome != sandbox.OutcomeCompleted || len(base.F2PFailed) != len(in.FailToPass) || len(base.P2PPassed) != len(in.PassToPass) {
				t.Fatalf("base: %+v", base)
			}
		})
	}
}

// TestGradeImage checks that the grader passes the sandbox image to the
// backend: the instance's Image, else Options.Image. An image the engine
// lacks ends in env_setup_failed (docker never pulls).
func TestGradeImage(t *testing.T) {
	b := backendFor(t, "docker")
	gold := pick(t, "python", "")
	present := os.Getenv("LEGORL_DOCKER_IMAGE")
	if present == "" {
		present = docker.DefaultImage
	}
	cases := []struct {
		name      string
		instImage string
		optImage  string
		want      sandbox.Outcome
	}{
		{"instance image", "legorl/no-such-image:1", "", sandbox.OutcomeEnvSetupFailed},
		{"option image", "", "legorl/no-such-image:2", sandbox.OutcomeEnvSetupFailed},
		{"instance image wins", present, "legorl/no-such-image:3", sandbox.OutcomeCompleted},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := *gold
			in.Image = c.instImage
			g := mustGradeWith(t, grade.New(b, grade.Options{Image: c.optImage}), &in, in.Patch)
			if g.Outcome != c.want {
				t.Fatalf("outcome %s, want %s: %s", g.Outcome, c.want, g.Detail)
			}
			if c.want == sandbox.OutcomeEnvSetupFailed && !strings.Contains(g.Detail, "no-such-image") {
				t.Fatalf("detail does not name the image: %s", g.Detail)
			}
			if c.want == sandbox.OutcomeCompleted && g.Reward != 1 {
				t.Fatalf("gold patch in the named image: %+v", g)
			}
		})
	}
}

// TestGradeInfraMasked: when the environment cannot run the tests (here a
// Python interpreter that does not exist), neither the gold patch nor any
// other diff is scored: the grade ends in env_setup_failed with the typed
// reason, which the rollout masks.
func TestGradeInfraMasked(t *testing.T) {
	in := pick(t, "python", "")
	gr := grade.New(backend(), grade.Options{Python: "/nonexistent/python3"})
	for _, c := range []struct{ name, diff string }{{"gold", in.Patch}, {"base", ""}} {
		t.Run(c.name, func(t *testing.T) {
			g := mustGradeWith(t, gr, in, c.diff)
			if g.Outcome != sandbox.OutcomeEnvSetupFailed || g.Reward != 0 || !strings.HasPrefix(g.Infra, grade.InfraGoldFails+": ") {
				t.Fatalf("got outcome %s reward %v infra %q, want env_setup_failed with %s", g.Outcome, g.Reward, g.Infra, grade.InfraGoldFails)
			}
		})
	}
}

// TestCheckEnvironment: the check passes where every runner works, through
// pytest for Python (not the fast runner, which needs no pytest), and fails
// with a line that names the runner, the instance and the fix where the
// interpreter cannot run pytest.
func TestCheckEnvironment(t *testing.T) {
	dir, ins := suite(t)
	t.Run("ok", func(t *testing.T) {
		gr := grade.New(backend(), grade.Options{})
		if err := gr.CheckEnvironment(context.Background(), dir, ins); err != nil {
			t.Fatal(err)
		}
		if runs, _ := gr.FastCounts(); runs != 0 {
			t.Fatalf("the fast runner graded %d times: the check must run pytest", runs)
		}
	})
	t.Run("no pytest", func(t *testing.T) {
		py := pick(t, "python", "")
		gr := grade.New(backend(), grade.Options{Python: "/nonexistent/python3"})
		err := gr.CheckEnvironment(context.Background(), dir, []tasks.Instance{*py})
		if err == nil {
			t.Fatal("no error from a grader whose interpreter does not exist")
		}
		for _, want := range []string{"fails its pytest tests here", py.InstanceID, grade.InfraGoldFails, "/nonexistent/python3 must import pytest"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not say %q", err, want)
			}
		}
		if strings.Contains(err.Error(), "\n") {
			t.Errorf("error is not one line: %q", err)
		}
	})
}
