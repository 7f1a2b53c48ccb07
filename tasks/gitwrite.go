package tasks

import (
	"bytes"
	"compress/zlib"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// gitIdent and gitDate are the author and committer of CreateRepo's
// commit (GitEnv's, as git writes them).
const (
	gitIdent = "legorl <legorl@example.invalid>"
	gitDate  = "1704067200 +0000" // 2024-01-01T00:00:00Z
)

// writeRepo writes, without running git, the repository git init, add
// and commit would make of tree t in dir (whose working files are
// already written): loose objects, refs/heads/main and HEAD. The commit
// id is the one git computes for the same tree, identity, date and
// message. It returns the commit id.
func writeRepo(dir string, t Tree, message string) (string, error) {
	gd := filepath.Join(dir, ".git")
	for _, d := range []string{"objects", "refs/heads", "refs/tags"} {
		if err := os.MkdirAll(filepath.Join(gd, d), 0o755); err != nil {
			return "", err
		}
	}
	w := objectWriter{dir: filepath.Join(gd, "objects"), made: map[string]bool{}}
	root, err := w.tree(t, "")
	if err != nil {
		return "", err
	}
	commit, err := w.put("commit", []byte(fmt.Sprintf("tree %s\nauthor %s %s\ncommitter %s %s\n\n%s\n", root, gitIdent, gitDate, gitIdent, gitDate, message)))
	if err != nil {
		return "", err
	}
	files := map[string]string{
		"HEAD":            "ref: refs/heads/main\n",
		"config":          "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n\tlogallrefupdates = true\n",
		"refs/heads/main": commit + "\n",
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(gd, name), []byte(body), 0o644); err != nil {
			return "", err
		}
	}
	return commit, nil
}

type objectWriter struct {
	dir  string
	made map[string]bool // object folders made
}

// tree writes the tree object of the paths of t under prefix ("" or
// "dir/") and its subtrees, and returns its id.
func (w *objectWriter) tree(t Tree, prefix string) (string, error) {
	type entry struct {
		name, mode, id string
		dir            bool
	}
	seen := map[string]bool{}
	var entries []entry
	for p, f := range t {
		if !strings.HasPrefix(p, prefix) {
			continue
		}
		rest := p[len(prefix):]
		if name, _, isDir := strings.Cut(rest, "/"); isDir {
			if !seen[name] {
				seen[name] = true
				id, err := w.tree(t, prefix+name+"/")
				if err != nil {
					return "", err
				}
				entries = append(entries, entry{name: name, mode: "40000", id: id, dir: true})
			}
			continue
		}
		mode := "100644"
		switch f.Mode {
		case ModeExec:
			mode = "100755"
		case ModeSymlink:
			mode = "120000"
		}
		id, err := w.put("blob", f.Data)
		if err != nil {
			return "", err
		}
		entries = append(entries, entry{name: rest, mode: mode, id: id})
	}
	// git orders a tree's entries by name, a folder's name as if it ended in "/".
	key := func(e entry) string {
		if e.dir {
			return e.name + "/"
		}
		return e.name
	}
	sort.Slice(entries, func(i, j int) bool { return key(entries[i]) < key(entries[j]) })
	var b bytes.Buffer
	for _, e := range entries {
		raw, _ := hex.DecodeString(e.id)
		b.WriteString(e.mode + " " + e.name + "\x00")
		b.Write(raw)
	}
	return w.put("tree", b.Bytes())
}

// put writes one loose object (zlib of "TYPE LEN\0BODY", read-only) and
// returns its id.
func (w *objectWriter) put(kind string, body []byte) (string, error) {
	head := kind + " " + strconv.Itoa(len(body)) + "\x00"
	h := sha1.New()
	h.Write([]byte(head))
	h.Write(body)
	id := hex.EncodeToString(h.Sum(nil))
	sub := filepath.Join(w.dir, id[:2])
	file := filepath.Join(sub, id[2:])
	if !w.made[id[:2]] {
		if err := os.MkdirAll(sub, 0o755); err != nil {
			return "", err
		}
		w.made[id[:2]] = true
	}
	if _, err := os.Stat(file); err == nil {
		return id, nil
	}
	var z bytes.Buffer
	zw := zlib.NewWriter(&z)
	zw.Write([]byte(head))
	zw.Write(body)
	if err := zw.Close(); err != nil {
		return "", err
	}
	if err := os.WriteFile(file, z.Bytes(), 0o444); err != nil {
		return "", fmt.Errorf("tasks: object %s: %w", path.Base(file), err)
	}
	return id, nil
}
