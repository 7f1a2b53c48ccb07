// Package docker is the sandbox backend for image-based tasks (such as
// SWE-bench images): each sandbox is one container, created through the
// Docker Engine API from a local image (nothing is ever pulled).
//
// A container runs with no network (network mode none: only its own
// loopback), a read-only root file system, a size-capped tmpfs /tmp, all
// capabilities dropped, no-new-privileges, a non-root user, and memory,
// pids and CPU limits. The workspace is a private host copy of
// Spec.Workspace on a tmpfs of Limits.DiskBytes mounted on a host folder,
// bind-mounted at Spec.WorkspaceDir, so the caller reads the agent's
// changes on the host (HostWorkspace) without running anything inside, and
// the engine must run in the host process's mount namespace (Create checks). Exec runs each command through container exec in a cgroup of
// its own, so that when the command exits, or at its deadline, the backend
// kills (from the host) every process it started. Listen opens a listener
// inside the container's network namespace, the only thing programs inside
// can reach.
package docker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/legorl/legorl/sandbox"
	"github.com/legorl/legorl/sandbox/internal/capfs"
)

// DefaultImage is the image used when neither Spec.Image nor Options.Image
// names one. scripts/docker/base-image.sh builds it (a minbase Debian
// bookworm with python3, pytest, git, bash and coreutils); the two must
// agree on the tag.
const DefaultImage = "legorl/base:bookworm-1"

// DefaultUser is the user every command runs as: uid and gid 1000 (the
// base image names it "sandbox"). Numeric, so it works in any image.
const DefaultUser = "1000:1000"

// LabelKey marks every container this package creates, so leftovers can be
// found (and tests can prove there are none). Its value is the creating
// process's id (Owner), so a check for leftovers looks at its own process's
// containers only: several processes (test binaries) may share one engine.
const LabelKey = "io.legorl.sandbox"

// Owner returns the value of LabelKey on the containers this process creates.
func Owner() string { return strconv.Itoa(os.Getpid()) }

// Sentinel errors.
var (
	// ErrNoDaemon: the Docker Engine did not answer.
	ErrNoDaemon = errors.New("docker: no engine answered")
	// ErrImageMissing: the image is not present locally. No registry is
	// reachable, so it is never pulled; build it (scripts/docker/base-image.sh).
	ErrImageMissing = errors.New("docker: image not present locally")
)

// Options configure a Backend.
type Options struct {
	// Host is the Engine API address, e.g. unix:///run/legorl/docker.sock.
	// Defaults to unix:///var/run/docker.sock.
	Host string
	// Image is used when Spec.Image is empty. Defaults to DefaultImage.
	Image string
	// User runs every command, as "uid:gid". Must not be root. Defaults to DefaultUser.
	User string
	// TempDir holds the workspace copies. Defaults to os.TempDir().
	TempDir string
	// Metrics, when not nil, counts sandboxes and commands in Prometheus
	// metrics (sandbox.NewMetrics), labelled backend="docker". Defaults to
	// nil: no metrics.
	Metrics *sandbox.Metrics
}

// Backend creates container sandboxes on one Docker Engine. It is safe for
// concurrent use.
type Backend struct {
	cli  *client.Client
	opts Options
	uid  int
	gid  int

	gcOnce sync.Once // removes what dead host processes left
}

var _ sandbox.Backend = (*Backend)(nil)

// New connects to the engine at opts.Host and checks that it answers. It
// fails with ErrNoDaemon (wrapped) when it does not.
func New(ctx context.Context, opts Options) (*Backend, error) {
	if opts.Host == "" {
		opts.Host = "unix:///var/run/docker.sock"
	}
	if opts.Image == "" {
		opts.Image = DefaultImage
	}
	if opts.User == "" {
		opts.User = DefaultUser
	}
	if opts.TempDir == "" {
		opts.TempDir = os.TempDir()
	}
	uid, gid, err := parseUser(opts.User)
	if err != nil {
		return nil, err
	}
	cli, err := client.New(client.WithHost(opts.Host), client.WithAPIVersionNegotiation())
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrNoDaemon, opts.Host, err)
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := cli.Ping(pctx, client.PingOptions{NegotiateAPIVersion: true}); err != nil {
		cli.Close()
		return nil, fmt.Errorf("%w: %s: %v", ErrNoDaemon, opts.Host, err)
	}
	return &Backend{cli: cli, opts: opts, uid: uid, gid: gid}, nil
}

// parseUser reads "uid:gid" and refuses root.
func parseUser(s string) (uid, gid int, err error) {
	u, g, ok := strings.Cut(s, ":")
	uid, err1 := strconv.Atoi(u)
	gid, err2 := strconv.Atoi(g)
	if !ok || err1 != nil || err2 != nil || uid < 0 || gid < 0 {
		return 0, 0, fmt.Errorf("docker: user %q is not uid:gid", s)
	}
	if uid == 0 || gid == 0 {
		return 0, 0, fmt.Errorf("docker: user %q is root; sandboxes run as a non-root user", s)
	}
	return uid, gid, nil
}

// Name returns "docker".
func (b *Backend) Name() string { return "docker" }

// Close releases the engine connection. Sandboxes must be closed first.
func (b *Backend) Close() error { return b.cli.Close() }

// Create copies spec.Workspace to a private host folder (a tmpfs of
// Limits.DiskBytes), creates and starts
// a container from the image with that copy at spec.WorkspaceDir, and
// returns it. With no spec.Workspace, the copy is taken from the image's
// own spec.WorkspaceDir (empty if the image has none): image-based tasks
// keep their repository in the image. Errors wrap sandbox.ErrSetup.
func (b *Backend) Create(ctx context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
	s, err := b.create(ctx, spec)
	b.opts.Metrics.Created("docker", err)
	if err != nil {
		return nil, err
	}
	s.met = b.opts.Metrics
	return s, nil
}

func (b *Backend) create(ctx context.Context, spec sandbox.Spec) (*box, error) {
	spec = spec.WithDefaults()
	lim := spec.Limits
	image := spec.Image
	if image == "" {
		image = b.opts.Image
	}
	if !filepath.IsAbs(spec.WorkspaceDir) {
		return nil, fmt.Errorf("%w: docker: workspace dir %q is not absolute", sandbox.ErrSetup, spec.WorkspaceDir)
	}
	for _, m := range spec.Mounts {
		if !filepath.IsAbs(m.Source) || !filepath.IsAbs(m.Target) || strings.ContainsAny(m.Source+m.Target, ":,") {
			return nil, fmt.Errorf("%w: docker: mount %q -> %q needs absolute paths without ':' or ','", sandbox.ErrSetup, m.Source, m.Target)
		}
	}

	b.gcOnce.Do(func() { collectOrphans(b.opts.TempDir) })
	dir, err := os.MkdirTemp(b.opts.TempDir, dirPrefix+strconv.Itoa(os.Getpid())+"-")
	if err != nil {
		return nil, fmt.Errorf("%w: docker: temp dir: %v", sandbox.ErrSetup, err)
	}
	s := &box{b: b, dir: dir, ws: filepath.Join(dir, "workspace"), spec: spec, lim: lim}
	ok := false
	defer func() {
		if !ok {
			s.Close()
		}
	}()
	if err := os.Mkdir(s.ws, 0o755); err != nil {
		return nil, fmt.Errorf("%w: docker: workspace: %v", sandbox.ErrSetup, err)
	}
	// The copy lives on a tmpfs of Limits.DiskBytes, bind-mounted in.
	if err := capfs.Mount(s.ws, lim.DiskBytes, b.uid, b.gid); err != nil {
		return nil, fmt.Errorf("%w: docker: workspace: %v", sandbox.ErrSetup, err)
	}
	if spec.Workspace != "" {
		err = copyWorkspace(ctx, spec.Workspace, s.ws)
	} else {
		// An image-based task: the repository is in the image.
		err = b.seedFromImage(ctx, image, spec.WorkspaceDir, s.ws)
	}
	if err == nil {
		err = chownTree(s.ws, b.uid, b.gid)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: docker: %w", sandbox.ErrSetup, err)
	}

	name := "legorl-" + randomHex(8)
	binds := []string{s.ws + ":" + spec.WorkspaceDir + ":rw"}
	for _, m := range spec.Mounts {
		mode := "rw"
		if m.ReadOnly {
			mode = "ro"
		}
		binds = append(binds, m.Source+":"+m.Target+":"+mode)
	}
	pids := int64(lim.Pids)
	// pid 1 is the engine's init (tini): it reaps the orphans that killed
	// exec trees leave, which would otherwise stay as zombies and hold the
	// pids limit. It needs nothing from the image.
	init := true
	noSwap := lim.MemoryBytes // memory+swap == memory: no swap
	cfg := &container.Config{
		Image:           image,
		User:            b.opts.User,
		Cmd:             []string{"sleep", "infinity"},
		Entrypoint:      []string{},
		Env:             baseEnv(spec.Env),
		WorkingDir:      spec.WorkspaceDir,
		Hostname:        "sandbox",
		NetworkDisabled: false, // network mode none gives a private netns with loopback only
		Labels:          map[string]string{LabelKey: Owner()},
		StopTimeout:     new(int), // Close kills at once
	}
	host := &container.HostConfig{
		Binds:          binds,
		NetworkMode:    "none",
		ReadonlyRootfs: true,
		CapDrop:        []string{"ALL"},
		SecurityOpt:    []string{"no-new-privileges"},
		Tmpfs: map[string]string{
			"/tmp": fmt.Sprintf("rw,nosuid,nodev,size=%d,mode=1777", lim.TmpBytes),
		},
		Init:          &init,
		ShmSize:       16 << 20,
		IpcMode:       "private",
		LogConfig:     container.LogConfig{Type: "none"},
		AutoRemove:    false,
		Privileged:    false,
		RestartPolicy: container.RestartPolicy{Name: container.RestartPolicyDisabled},
		Resources: container.Resources{
			Memory:     lim.MemoryBytes,
			MemorySwap: noSwap,
			NanoCPUs:   int64(lim.CPUs * 1e9),
			PidsLimit:  &pids,
		},
	}
	created, err := b.cli.ContainerCreate(ctx, client.ContainerCreateOptions{Name: name, Config: cfg, HostConfig: host})
	if err != nil {
		if cerrdefs.IsNotFound(err) {
			return nil, fmt.Errorf("%w: %w: %s (build it with scripts/docker/base-image.sh; nothing is pulled)", sandbox.ErrSetup, ErrImageMissing, image)
		}
		return nil, fmt.Errorf("%w: docker: create container from %s: %v", sandbox.ErrSetup, image, err)
	}
	s.id = created.ID
	if _, err := b.cli.ContainerStart(ctx, s.id, client.ContainerStartOptions{}); err != nil {
		return nil, fmt.Errorf("%w: docker: start container: %v", sandbox.ErrSetup, err)
	}
	ins, err := b.cli.ContainerInspect(ctx, s.id, client.ContainerInspectOptions{})
	if err != nil {
		return nil, fmt.Errorf("%w: docker: inspect container: %v", sandbox.ErrSetup, err)
	}
	if ins.Container.State == nil || ins.Container.State.Pid <= 0 {
		return nil, fmt.Errorf("%w: docker: container did not start", sandbox.ErrSetup)
	}
	s.pid = ins.Container.State.Pid
	s.cg, err = findCgroups(s.pid)
	if err != nil {
		return nil, fmt.Errorf("%w: docker: %v", sandbox.ErrSetup, err)
	}
	if err := s.checkWorkspaceMount(); err != nil {
		return nil, fmt.Errorf("%w: docker: %v", sandbox.ErrSetup, err)
	}
	ok = true
	return s, nil
}

// baseEnv is the minimal environment plus extra (later entries win).
func baseEnv(extra []string) []string {
	env := []string{
		"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"HOME=/tmp",
		"LANG=C.UTF-8",
	}
	return append(env, extra...)
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// box is one container sandbox.
type box struct {
	b    *Backend
	id   string // container id; empty until created
	pid  int    // host pid of the container's init
	cg   cgroups
	dir  string // host temp folder holding ws
	ws   string // host workspace copy
	spec sandbox.Spec
	lim  sandbox.Limits

	mu       sync.Mutex
	closed   bool
	oomDeath string // why the container died, when the memory limit killed it

	met *sandbox.Metrics // set once Create has counted the sandbox
}

var _ sandbox.Sandbox = (*box)(nil)

// HostWorkspace returns the host path of the workspace copy.
func (s *box) HostWorkspace() string { return s.ws }

// Listen opens a TCP listener on 127.0.0.1:port inside the container's
// network namespace.
func (s *box) Listen(ctx context.Context, port int) (net.Listener, error) {
	if err := s.alive(); err != nil {
		return nil, err
	}
	if port < 0 || port > 65535 {
		return nil, fmt.Errorf("docker: listen: port %d out of range", port)
	}
	return listenInNetns(ctx, fmt.Sprintf("/proc/%d/ns/net", s.pid), port)
}

func (s *box) alive() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return sandbox.ErrClosed
	}
	return nil
}

// Close removes the container (killing everything inside), unmounts the
// workspace and removes its folder. It is safe to call more than once.
func (s *box) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	s.met.Closed("docker")
	var errs []error
	if s.id != "" {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		_, err := s.b.cli.ContainerRemove(ctx, s.id, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
		cancel()
		if err != nil && !cerrdefs.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("docker: remove container %s: %w", s.id[:12], err))
		}
	}
	if s.pid > 0 {
		if err := s.cg.removeLeftovers(); err != nil {
			errs = append(errs, fmt.Errorf("docker: %w", err))
		}
	}
	if err := capfs.RemoveAll(s.dir); err != nil {
		errs = append(errs, fmt.Errorf("docker: remove %s: %w", s.dir, err))
	}
	return errors.Join(errs...)
}

// checkWorkspaceMount makes sure the container shows the host's capped
// workspace, not the folder under it: an engine in another mount namespace
// would bind the empty folder, and the sandbox would write to the host's
// disk, uncapped, where HostWorkspace does not look.
func (s *box) checkWorkspaceMount() error {
	var host, inside syscall.Stat_t
	if err := syscall.Stat(s.ws, &host); err != nil {
		return fmt.Errorf("workspace: %w", err)
	}
	in := fmt.Sprintf("/proc/%d/root%s", s.pid, s.spec.WorkspaceDir)
	if err := syscall.Stat(in, &inside); err != nil {
		return fmt.Errorf("workspace inside: %w", err)
	}
	if host.Dev != inside.Dev || host.Ino != inside.Ino {
		return fmt.Errorf("the container's %s is not the host's workspace mount %s (is the engine in another mount namespace?)", s.spec.WorkspaceDir, s.ws)
	}
	return nil
}
