package tasks

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/legorl/legorl/text"
)

// GitEnv is the environment of every git process this project runs: no
// system or global configuration, no prompts, a fixed identity and date so
// that commits are reproducible.
func GitEnv() []string {
	return []string{
		"PATH=/usr/local/bin:/usr/bin:/bin",
		"HOME=/nonexistent",
		"LANG=C",
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_ATTR_NOSYSTEM=1",
		"GIT_TERMINAL_PROMPT=0",
		"GIT_OPTIONAL_LOCKS=0",
		"GIT_AUTHOR_NAME=legorl", "GIT_AUTHOR_EMAIL=legorl@example.invalid",
		"GIT_COMMITTER_NAME=legorl", "GIT_COMMITTER_EMAIL=legorl@example.invalid",
		"GIT_AUTHOR_DATE=2024-01-01T00:00:00Z", "GIT_COMMITTER_DATE=2024-01-01T00:00:00Z",
	}
}

// GitSafeFlags switch off everything in git that runs a program or reads
// configuration a repository could plant: hooks, fsmonitor, pagers,
// attribute files, reflogs.
var GitSafeFlags = []string{
	"-c", "core.hooksPath=/dev/null",
	"-c", "core.fsmonitor=false",
	"-c", "core.pager=cat",
	"-c", "core.attributesFile=/dev/null",
	"-c", "core.logAllRefUpdates=false",
	"-c", "core.sshCommand=false",
	"-c", "protocol.allow=never",
	"-c", "protocol.file.allow=always",
	"-c", "advice.detachedHead=false",
}

// Git runs git with GitEnv and GitSafeFlags in dir and returns its stdout.
func Git(ctx context.Context, dir string, stdin io.Reader, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "git", append(append([]string{}, GitSafeFlags...), args...)...)
	cmd.Dir = dir
	cmd.Env = GitEnv()
	cmd.Stdin = stdin
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.Bytes(), fmt.Errorf("git %s: %v: %s", strings.Join(args, " "), err, text.OneLine(stderr.String(), 300))
	}
	return stdout.Bytes(), nil
}

// WriteTree writes a tree into dir (which must not exist or be empty).
func WriteTree(dir string, t Tree) error {
	for p, f := range t {
		if err := CheckPath(p); err != nil {
			return err
		}
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return fmt.Errorf("tasks: %w", err)
		}
		switch f.Mode {
		case ModeSymlink:
			if err := os.Symlink(string(f.Data), full); err != nil {
				return fmt.Errorf("tasks: %w", err)
			}
		default:
			perm := os.FileMode(0o644)
			if f.Mode == ModeExec {
				perm = 0o755
			}
			if err := os.WriteFile(full, f.Data, perm); err != nil {
				return fmt.Errorf("tasks: %w", err)
			}
		}
	}
	return nil
}

// CreateRepo makes dir a git repository whose whole history is one commit
// of tree t on branch main, with a fixed author and date (the same tree
// gives the same commit id), no hooks, no reflog and no remotes. It returns
// the commit id.
func CreateRepo(ctx context.Context, dir string, t Tree, message string) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("tasks: %w", err)
	}
	if err := WriteTree(dir, t); err != nil {
		return "", err
	}
	// The objects are written here, not by git processes: a suite of
	// thousands of instances is made in about a minute (four git
	// processes per repository took three times as long). The commit is
	// the one git makes (TestCreateRepoMatchesGit).
	id, err := writeRepo(dir, t, message)
	if err != nil {
		return "", fmt.Errorf("tasks: %w", err)
	}
	return id, nil
}

// ReadTree returns the tree of commit in the repository at repo, read
// through git's plumbing (no attributes or filters applied).
func ReadTree(ctx context.Context, repo, commit string) (Tree, error) {
	if !isHex(commit) {
		return nil, fmt.Errorf("%w: bad commit %q", ErrSnapshot, commit)
	}
	ls, err := Git(ctx, repo, nil, "ls-tree", "-r", "-z", "--full-tree", commit)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrSnapshot, err)
	}
	type entry struct {
		mode uint32
		sha  string
		path string
	}
	var entries []entry
	var shas strings.Builder
	for _, rec := range strings.Split(string(ls), "\x00") {
		if rec == "" {
			continue
		}
		meta, p, ok := strings.Cut(rec, "\t")
		fields := strings.Fields(meta)
		if !ok || len(fields) != 3 {
			return nil, fmt.Errorf("%w: ls-tree record %q", ErrSnapshot, rec)
		}
		if fields[1] != "blob" {
			continue // submodules are not part of a snapshot
		}
		m, err := strconv.ParseUint(fields[0], 8, 32)
		if err != nil {
			return nil, fmt.Errorf("%w: mode %q", ErrSnapshot, fields[0])
		}
		entries = append(entries, entry{uint32(m), fields[2], p})
		shas.WriteString(fields[2] + "\n")
	}
	out, err := Git(ctx, repo, strings.NewReader(shas.String()), "cat-file", "--batch")
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrSnapshot, err)
	}
	br := bufio.NewReader(bytes.NewReader(out))
	t := Tree{}
	for _, e := range entries {
		hdr, err := br.ReadString('\n')
		if err != nil {
			return nil, fmt.Errorf("%w: cat-file: %v", ErrSnapshot, err)
		}
		f := strings.Fields(hdr)
		if len(f) != 3 || f[0] != e.sha {
			return nil, fmt.Errorf("%w: cat-file header %q", ErrSnapshot, hdr)
		}
		n, err := strconv.Atoi(f[2])
		if err != nil {
			return nil, fmt.Errorf("%w: cat-file size %q", ErrSnapshot, f[2])
		}
		data := make([]byte, n)
		if _, err := io.ReadFull(br, data); err != nil {
			return nil, fmt.Errorf("%w: cat-file: %v", ErrSnapshot, err)
		}
		if _, err := br.ReadByte(); err != nil {
			return nil, fmt.Errorf("%w: cat-file: %v", ErrSnapshot, err)
		}
		mode := e.mode
		if mode != ModeExec && mode != ModeSymlink {
			mode = ModeFile
		}
		t[e.path] = File{Data: data, Mode: mode}
	}
	return t, nil
}

// PrepareWorkspace makes dst an agent workspace for commit of the
// repository at snapshot: a fresh repository holding only that commit's
// objects (a depth-1 fetch), checked out on branch main, with no remotes,
// no reflog, no tags, no hooks and no FETCH_HEAD. Nothing after the commit
// exists in it.
func PrepareWorkspace(ctx context.Context, snapshot, commit, dst string) error {
	if !isHex(commit) {
		return fmt.Errorf("%w: bad commit %q", ErrSnapshot, commit)
	}
	abs, err := filepath.Abs(snapshot)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrSnapshot, err)
	}
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return fmt.Errorf("tasks: %w", err)
	}
	steps := [][]string{
		{"init", "-q", "-b", "main", "--template=", "."},
		{"-c", "uploadpack.allowAnySHA1InWant=true", "fetch", "-q", "--no-tags", "--depth=1", "file://" + abs, commit},
		{"update-ref", "refs/heads/main", commit},
		{"read-tree", "-u", "--reset", "main"},
	}
	for _, s := range steps {
		if _, err := Git(ctx, dst, nil, s...); err != nil {
			return fmt.Errorf("%w: %v", ErrSnapshot, err)
		}
	}
	for _, p := range []string{"FETCH_HEAD", "ORIG_HEAD", "logs", "hooks", "description", "info"} {
		if err := os.RemoveAll(filepath.Join(dst, ".git", p)); err != nil {
			return fmt.Errorf("tasks: %w", err)
		}
	}
	return nil
}
