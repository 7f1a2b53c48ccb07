package harness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
)

// ErrInstall: a harness program could not be installed.
var ErrInstall = errors.New("harness: install failed")

// npmPackage is a pinned npm package that holds a harness program.
type npmPackage struct {
	Name    string // e.g. "@openai/codex"
	Version string // exact, e.g. "0.169.0"
	Main    string // the program's script, relative to the package folder
	// Also are pinned packages installed with it (e.g. Node.js 22).
	Also []npmPackage
}

// installMu serializes installs within the process; a lock file does
// across processes.
var installMu sync.Mutex

// install makes the pinned package available and returns the folder that
// holds its node_modules. A folder where it is already installed at its
// pinned version is used as it is: cacheDir itself (e.g. tools/harnesses,
// where `make test-harnesses` installs the pinned set with npm ci) or
// cacheDir/<name>-<version>. Otherwise it runs `npm install` into the
// latter, once (a stamp file), under a lock. Everything it writes is
// readable by others: the sandbox's root is another host uid.
func (p npmPackage) install(ctx context.Context, cacheDir string) (string, error) {
	if cacheDir == "" {
		return "", fmt.Errorf("%w: %s: no cache folder", ErrInstall, p.Name)
	}
	abs, err := filepath.Abs(cacheDir)
	if err != nil {
		return "", fmt.Errorf("%w: %s: %w", ErrInstall, p.Name, err)
	}
	if p.installedIn(abs) {
		return abs, nil
	}
	dir := filepath.Join(abs, strings.NewReplacer("@", "", "/", "-").Replace(p.Name)+"-"+p.Version)
	stamp := filepath.Join(dir, "node_modules", ".legorl-installed")
	if _, err := os.Stat(stamp); err == nil && p.installedIn(dir) {
		return dir, nil
	}
	installMu.Lock()
	defer installMu.Unlock()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("%w: %s: %w", ErrInstall, p.Name, err)
	}
	lock, err := os.OpenFile(filepath.Join(abs, ".lock-"+filepath.Base(dir)), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", fmt.Errorf("%w: %s: %w", ErrInstall, p.Name, err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", fmt.Errorf("%w: %s: lock: %w", ErrInstall, p.Name, err)
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
	if _, err := os.Stat(stamp); err == nil && p.installedIn(dir) {
		return dir, nil
	}
	if err := os.WriteFile(filepath.Join(dir, "package.json"), []byte(`{"private": true}`+"\n"), 0o644); err != nil {
		return "", fmt.Errorf("%w: %s: %w", ErrInstall, p.Name, err)
	}
	args := []string{"install", "--no-audit", "--no-fund", "--loglevel=error", "--save-exact", p.Name + "@" + p.Version}
	for _, a := range p.Also {
		args = append(args, a.Name+"@"+a.Version)
	}
	cmd := exec.CommandContext(ctx, "npm", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "npm_config_update_notifier=false")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("%w: npm install %s@%s: %w: %s", ErrInstall, p.Name, p.Version, err, tail(out, 2000))
	}
	if !p.installedIn(dir) {
		return "", fmt.Errorf("%w: npm install %s@%s left no %s", ErrInstall, p.Name, p.Version, p.Main)
	}
	if err := os.WriteFile(stamp, nil, 0o644); err != nil {
		return "", fmt.Errorf("%w: %s: %w", ErrInstall, p.Name, err)
	}
	return dir, nil
}

// installedIn reports whether dir/node_modules holds the package at its
// pinned version, with its program.
func (p npmPackage) installedIn(dir string) bool {
	pkg := filepath.Join(dir, "node_modules", filepath.FromSlash(p.Name))
	b, err := os.ReadFile(filepath.Join(pkg, "package.json"))
	if err != nil {
		return false
	}
	var meta struct{ Version string }
	if json.Unmarshal(b, &meta) != nil || meta.Version != p.Version {
		return false
	}
	if _, err := os.Stat(filepath.Join(pkg, filepath.FromSlash(p.Main))); err != nil {
		return false
	}
	for _, a := range p.Also {
		if !a.installedIn(dir) {
			return false
		}
	}
	return true
}

// script is the program's path inside the sandbox, where the install
// folder is shown at programDir.
func (p npmPackage) script(programDir string) string {
	return programDir + "/node_modules/" + p.Name + "/" + p.Main
}

// nodePath is Node.js inside the sandbox: the host's, under the /usr that
// the local sandbox shows read-only (Debian's nodejs).
const nodePath = "/usr/bin/node"

// wrap runs a harness program through sh: it copies the read-only
// config folder src (where Launch.Files are) to the writable dst first
// (the programs write state next to their configuration), then runs args
// with the task file's text as the last argument and an empty stdin. The
// env it returns goes in the Cmd.
func wrap(src, dst, taskFile string, args ...string) (argv, env []string) {
	script := `set -e; mkdir -p "$LEGORL_STATE"; cp -R "$LEGORL_CONFIG/." "$LEGORL_STATE/"; ` +
		`task=$(cat "$LEGORL_TASK"); exec "$@" "$task" </dev/null`
	argv = append([]string{"/bin/sh", "-c", script, "sh"}, args...)
	return argv, []string{"LEGORL_CONFIG=" + src, "LEGORL_STATE=" + dst, "LEGORL_TASK=" + taskFile}
}

func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return strings.TrimSpace(string(b))
}

// jsonLines calls fn with each line of out that is a JSON object, and
// with each object of a line that is a JSON array of them.
func jsonLines(out []byte, fn func(line []byte)) {
	for _, l := range strings.Split(string(out), "\n") {
		l = strings.TrimSpace(l)
		switch {
		case strings.HasPrefix(l, "{"):
			fn([]byte(l))
		case strings.HasPrefix(l, "["):
			var xs []json.RawMessage
			if json.Unmarshal([]byte(l), &xs) == nil {
				for _, x := range xs {
					if len(x) > 0 && x[0] == '{' {
						fn(x)
					}
				}
			}
		}
	}
}
