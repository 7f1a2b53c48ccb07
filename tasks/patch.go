package tasks

import (
	"bytes"
	"errors"
	"fmt"
	"path"
	"sort"
	"strconv"
	"strings"
)

// File is one file of a tree: its bytes and git mode (0o100644, 0o100755,
// or 0o120000 for a symlink, whose Data is the link target).
type File struct {
	Data []byte
	Mode uint32
}

// Git file modes.
const (
	ModeFile    uint32 = 0o100644
	ModeExec    uint32 = 0o100755
	ModeSymlink uint32 = 0o120000
)

// Tree maps slash-separated paths relative to the repository root to files.
type Tree map[string]File

// Patch refusal reasons, each wrapping ErrPatch.
var (
	ErrPatchBinary   = fmt.Errorf("%w: binary content", ErrPatch)
	ErrPatchTooLarge = fmt.Errorf("%w: too large", ErrPatch)
	ErrPatchPath     = fmt.Errorf("%w: path refused", ErrPatch)
	ErrPatchSymlink  = fmt.Errorf("%w: symlink leaves the repository", ErrPatch)
	ErrPatchSyntax   = fmt.Errorf("%w: malformed", ErrPatch)
)

// PatchLimits bound what a patch may hold.
type PatchLimits struct {
	MaxBytes int // whole patch. Defaults to 1 MiB.
	MaxFiles int // files touched. Defaults to 200.
}

// DefaultPatchLimits are the limits used when none are given.
var DefaultPatchLimits = PatchLimits{MaxBytes: 1 << 20, MaxFiles: 200}

func (l PatchLimits) withDefaults() PatchLimits {
	if l.MaxBytes <= 0 {
		l.MaxBytes = DefaultPatchLimits.MaxBytes
	}
	if l.MaxFiles <= 0 {
		l.MaxFiles = DefaultPatchLimits.MaxFiles
	}
	return l
}

// CheckPath refuses a repository path that is empty, absolute, climbs out
// (".."), names a .git folder (in any letter case), or holds characters
// that git would quote.
func CheckPath(p string) error {
	if p == "" || strings.HasPrefix(p, "/") {
		return fmt.Errorf("%w: %q", ErrPatchPath, p)
	}
	for _, c := range p {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("._-/+@=,~", c)) {
			return fmt.Errorf("%w: %q has a character outside [A-Za-z0-9._-/+@=,~]", ErrPatchPath, p)
		}
	}
	for _, part := range strings.Split(p, "/") {
		if part == "" || part == "." || part == ".." || strings.EqualFold(part, ".git") {
			return fmt.Errorf("%w: %q", ErrPatchPath, p)
		}
	}
	return nil
}

// CheckSymlink refuses a symlink at repository path p whose target is
// absolute or resolves outside the repository or into .git.
func CheckSymlink(p, target string) error {
	if target == "" || strings.HasPrefix(target, "/") || strings.ContainsRune(target, 0) {
		return fmt.Errorf("%w: %s -> %q", ErrPatchSymlink, p, target)
	}
	j := path.Clean(path.Join(path.Dir(p), target))
	if j == ".." || strings.HasPrefix(j, "../") {
		return fmt.Errorf("%w: %s -> %q", ErrPatchSymlink, p, target)
	}
	for _, part := range strings.Split(j, "/") {
		if strings.EqualFold(part, ".git") {
			return fmt.Errorf("%w: %s -> %q", ErrPatchSymlink, p, target)
		}
	}
	return nil
}

// IsBinary reports whether data looks binary (a NUL byte in its first
// 8000 bytes, git's rule).
func IsBinary(data []byte) bool {
	if len(data) > 8000 {
		data = data[:8000]
	}
	return bytes.IndexByte(data, 0) >= 0
}

// Diff returns a git-style unified diff (three lines of context) that turns
// tree a into tree b: paths in sorted order, new and deleted files and mode
// changes with git's headers. It refuses binary content, bad paths, and
// symlinks leaving the repository, with the typed reasons above.
func Diff(a, b Tree) (string, error) {
	paths := map[string]bool{}
	for p := range a {
		paths[p] = true
	}
	for p := range b {
		paths[p] = true
	}
	sorted := make([]string, 0, len(paths))
	for p := range paths {
		sorted = append(sorted, p)
	}
	sort.Strings(sorted)
	var out strings.Builder
	for _, p := range sorted {
		fa, inA := a[p]
		fb, inB := b[p]
		if inA && inB && fa.Mode == fb.Mode && bytes.Equal(fa.Data, fb.Data) {
			continue
		}
		if err := CheckPath(p); err != nil {
			return "", err
		}
		if inB && fb.Mode == ModeSymlink {
			if err := CheckSymlink(p, string(fb.Data)); err != nil {
				return "", err
			}
		}
		if (inA && IsBinary(fa.Data)) || (inB && IsBinary(fb.Data)) {
			return "", fmt.Errorf("%w: %s", ErrPatchBinary, p)
		}
		// A type change (file <-> symlink) is a delete and an add, as git writes it.
		if inA && inB && (fa.Mode == ModeSymlink) != (fb.Mode == ModeSymlink) {
			writeFileDiff(&out, p, &fa, nil)
			writeFileDiff(&out, p, nil, &fb)
			continue
		}
		var pa, pb *File
		if inA {
			pa = &fa
		}
		if inB {
			pb = &fb
		}
		writeFileDiff(&out, p, pa, pb)
	}
	return out.String(), nil
}

func writeFileDiff(w *strings.Builder, p string, a, b *File) {
	fmt.Fprintf(w, "diff --git a/%s b/%s\n", p, p)
	var old, new []byte
	switch {
	case a == nil:
		fmt.Fprintf(w, "new file mode %06o\n", b.Mode)
		new = b.Data
	case b == nil:
		fmt.Fprintf(w, "deleted file mode %06o\n", a.Mode)
		old = a.Data
	default:
		if a.Mode != b.Mode {
			fmt.Fprintf(w, "old mode %06o\nnew mode %06o\n", a.Mode, b.Mode)
		}
		old, new = a.Data, b.Data
	}
	if bytes.Equal(old, new) {
		return
	}
	if a == nil {
		w.WriteString("--- /dev/null\n")
	} else {
		fmt.Fprintf(w, "--- a/%s\n", p)
	}
	if b == nil {
		w.WriteString("+++ /dev/null\n")
	} else {
		fmt.Fprintf(w, "+++ b/%s\n", p)
	}
	writeHunks(w, splitLines(old), splitLines(new), 3)
}

// splitLines splits data into lines that keep their "\n"; the last line
// may lack one.
func splitLines(data []byte) []string {
	var out []string
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			out = append(out, string(data))
			break
		}
		out = append(out, string(data[:i+1]))
		data = data[i+1:]
	}
	return out
}

type opKind byte

const (
	opEq opKind = iota
	opDel
	opIns
)

type edit struct {
	kind opKind
	a, b int // line index in a (opEq, opDel) and b (opEq, opIns)
}

// myers returns the shortest edit script from a to b (Myers' O(ND) diff).
func myers(a, b []string) []edit {
	n, m := len(a), len(b)
	max := n + m
	off := max + 1
	v := make([]int, 2*max+3)
	var trace [][]int
	found := false
	for d := 0; d <= max && !found; d++ {
		snap := make([]int, len(v))
		copy(snap, v)
		trace = append(trace, snap)
		for k := -d; k <= d; k += 2 {
			var x int
			if k == -d || (k != d && v[off+k-1] < v[off+k+1]) {
				x = v[off+k+1]
			} else {
				x = v[off+k-1] + 1
			}
			y := x - k
			for x < n && y < m && a[x] == b[y] {
				x++
				y++
			}
			v[off+k] = x
			if x >= n && y >= m {
				found = true
				break
			}
		}
	}
	// Backtrack through the saved V arrays.
	var edits []edit
	x, y := n, m
	for d := len(trace) - 1; d >= 0; d-- {
		vd := trace[d]
		k := x - y
		var prevK int
		if k == -d || (k != d && vd[off+k-1] < vd[off+k+1]) {
			prevK = k + 1
		} else {
			prevK = k - 1
		}
		prevX := vd[off+prevK]
		prevY := prevX - prevK
		for x > prevX && y > prevY {
			x--
			y--
			edits = append(edits, edit{opEq, x, y})
		}
		if d > 0 {
			if x == prevX {
				y--
				edits = append(edits, edit{opIns, x, y})
			} else {
				x--
				edits = append(edits, edit{opDel, x, y})
			}
		}
	}
	for i, j := 0, len(edits)-1; i < j; i, j = i+1, j-1 {
		edits[i], edits[j] = edits[j], edits[i]
	}
	return edits
}

func writeHunks(w *strings.Builder, a, b []string, ctx int) {
	edits := myers(a, b)
	i := 0
	for i < len(edits) {
		// Find the next change.
		for i < len(edits) && edits[i].kind == opEq {
			i++
		}
		if i >= len(edits) {
			return
		}
		start := i - ctx
		if start < 0 {
			start = 0
		}
		// Extend while changes are within 2*ctx of each other.
		end := i
		for {
			for end < len(edits) && edits[end].kind != opEq {
				end++
			}
			eq := 0
			for end+eq < len(edits) && edits[end+eq].kind == opEq {
				eq++
			}
			if end+eq < len(edits) && eq <= 2*ctx {
				end += eq
				continue
			}
			end += min(eq, ctx)
			break
		}
		hunk := edits[start:end]
		oldStart, newStart, oldLen, newLen := -1, -1, 0, 0
		for _, e := range hunk {
			if e.kind != opIns {
				if oldStart < 0 {
					oldStart = e.a
				}
				oldLen++
			}
			if e.kind != opDel {
				if newStart < 0 {
					newStart = e.b
				}
				newLen++
			}
		}
		// Empty ranges start at the line before the hunk.
		first := hunk[0]
		if oldStart < 0 {
			oldStart = first.a - 1
		}
		if newStart < 0 {
			newStart = first.b - 1
		}
		fmt.Fprintf(w, "@@ -%s +%s @@\n", hunkRange(oldStart, oldLen), hunkRange(newStart, newLen))
		for _, e := range hunk {
			var line string
			switch e.kind {
			case opEq:
				line = " " + a[e.a]
			case opDel:
				line = "-" + a[e.a]
			case opIns:
				line = "+" + b[e.b]
			}
			w.WriteString(line)
			if !strings.HasSuffix(line, "\n") {
				w.WriteString("\n\\ No newline at end of file\n")
			}
		}
		i = end
	}
}

func hunkRange(start0, n int) string {
	if n == 0 {
		return strconv.Itoa(start0+1) + ",0"
	}
	if n == 1 {
		return strconv.Itoa(start0 + 1)
	}
	return strconv.Itoa(start0+1) + "," + strconv.Itoa(n)
}

// FilePatch is what a patch does to one file.
type FilePatch struct {
	OldPath, NewPath string // "" for /dev/null
	OldMode, NewMode uint32 // 0 when not stated
	Added, Removed   int    // lines
	Lines            []string
}

// Path returns the path the change leaves in the tree (the old path for a
// deletion).
func (f *FilePatch) Path() string {
	if f.NewPath != "" {
		return f.NewPath
	}
	return f.OldPath
}

// ParsePatch parses a git-style unified diff and applies the patch policy:
// at most limits.MaxBytes and MaxFiles, no binary patches, every path
// passes CheckPath, and symlinks (mode 120000) stay inside the repository.
func ParsePatch(text string, limits PatchLimits) ([]FilePatch, error) {
	limits = limits.withDefaults()
	if len(text) > limits.MaxBytes {
		return nil, fmt.Errorf("%w: %d bytes > %d", ErrPatchTooLarge, len(text), limits.MaxBytes)
	}
	if strings.IndexByte(text, 0) >= 0 {
		return nil, fmt.Errorf("%w: NUL byte", ErrPatchBinary)
	}
	lines := strings.SplitAfter(text, "\n")
	var files []FilePatch
	var cur *FilePatch
	inHunk := false
	oldLeft, newLeft := 0, 0
	flush := func() error {
		if cur == nil {
			return nil
		}
		if inHunk && (oldLeft != 0 || newLeft != 0) {
			return fmt.Errorf("%w: %s: hunk shorter than its header", ErrPatchSyntax, cur.Path())
		}
		if cur.OldPath == "" && cur.NewPath == "" {
			return fmt.Errorf("%w: file without a path", ErrPatchSyntax)
		}
		for _, p := range []string{cur.OldPath, cur.NewPath} {
			if p != "" {
				if err := CheckPath(p); err != nil {
					return err
				}
			}
		}
		if cur.NewMode == ModeSymlink || (cur.NewMode == 0 && cur.OldMode == ModeSymlink && cur.NewPath != "") {
			var target strings.Builder
			for _, l := range cur.Lines {
				if strings.HasPrefix(l, "+") && !strings.HasPrefix(l, "+++") {
					target.WriteString(strings.TrimSuffix(l[1:], "\n"))
				}
			}
			if err := CheckSymlink(cur.NewPath, target.String()); err != nil {
				return err
			}
		}
		files = append(files, *cur)
		if len(files) > limits.MaxFiles {
			return fmt.Errorf("%w: more than %d files", ErrPatchTooLarge, limits.MaxFiles)
		}
		cur, inHunk = nil, false
		return nil
	}
	for n, raw := range lines {
		if raw == "" {
			continue
		}
		l := strings.TrimSuffix(raw, "\n")
		if inHunk && (oldLeft > 0 || newLeft > 0) {
			switch {
			case strings.HasPrefix(l, " ") || l == "":
				oldLeft--
				newLeft--
			case strings.HasPrefix(l, "-"):
				oldLeft--
				cur.Removed++
			case strings.HasPrefix(l, "+"):
				newLeft--
				cur.Added++
			case strings.HasPrefix(l, `\`):
			default:
				return nil, fmt.Errorf("%w: line %d: unexpected %q inside a hunk", ErrPatchSyntax, n+1, trunc(l))
			}
			if oldLeft < 0 || newLeft < 0 {
				return nil, fmt.Errorf("%w: line %d: hunk longer than its header", ErrPatchSyntax, n+1)
			}
			cur.Lines = append(cur.Lines, raw)
			continue
		}
		switch {
		case strings.HasPrefix(l, `\`) && inHunk:
			continue
		case strings.HasPrefix(l, "diff --git "):
			if err := flush(); err != nil {
				return nil, err
			}
			cur = &FilePatch{}
			a, b, ok := splitGitHeader(strings.TrimPrefix(l, "diff --git "))
			if !ok {
				return nil, fmt.Errorf("%w: line %d: bad diff --git header", ErrPatchSyntax, n+1)
			}
			cur.OldPath, cur.NewPath = a, b
		case strings.HasPrefix(l, "GIT binary patch") || strings.HasPrefix(l, "Binary files "):
			return nil, fmt.Errorf("%w: line %d", ErrPatchBinary, n+1)
		case strings.HasPrefix(l, "--- "):
			if cur == nil || inHunk {
				if err := flush(); err != nil {
					return nil, err
				}
				cur = &FilePatch{}
			}
			p, err := headerPath(strings.TrimPrefix(l, "--- "), "a/")
			if err != nil {
				return nil, fmt.Errorf("line %d: %w", n+1, err)
			}
			cur.OldPath = p
		case strings.HasPrefix(l, "+++ "):
			if cur == nil {
				return nil, fmt.Errorf("%w: line %d: +++ without ---", ErrPatchSyntax, n+1)
			}
			p, err := headerPath(strings.TrimPrefix(l, "+++ "), "b/")
			if err != nil {
				return nil, fmt.Errorf("line %d: %w", n+1, err)
			}
			cur.NewPath = p
		case strings.HasPrefix(l, "@@ "):
			if cur == nil {
				return nil, fmt.Errorf("%w: line %d: hunk without a file header", ErrPatchSyntax, n+1)
			}
			o, nw, ok := parseHunkHeader(l)
			if !ok {
				return nil, fmt.Errorf("%w: line %d: bad hunk header %q", ErrPatchSyntax, n+1, trunc(l))
			}
			inHunk, oldLeft, newLeft = true, o, nw
			cur.Lines = append(cur.Lines, raw)
		case cur != nil && !inHunk:
			if err := parseExtHeader(cur, l); err != nil {
				return nil, fmt.Errorf("line %d: %w", n+1, err)
			}
		case inHunk && (strings.HasPrefix(l, "+") && !strings.HasPrefix(l, "+++ ") ||
			strings.HasPrefix(l, "-") && !strings.HasPrefix(l, "--- ") && l != "-- "):
			return nil, fmt.Errorf("%w: line %d: hunk longer than its header", ErrPatchSyntax, n+1)
		case cur == nil || inHunk:
			// Text between files (a commit message, git's "index" lines after hunks) is ignored.
		}
	}
	if err := flush(); err != nil {
		return nil, err
	}
	if len(files) == 0 && strings.TrimSpace(text) != "" {
		return nil, fmt.Errorf("%w: no file changes found", ErrPatchSyntax)
	}
	return files, nil
}

func parseExtHeader(cur *FilePatch, l string) error {
	mode := func(s string) (uint32, error) {
		v, err := strconv.ParseUint(strings.TrimSpace(s), 8, 32)
		if err != nil {
			return 0, fmt.Errorf("%w: bad mode %q", ErrPatchSyntax, trunc(s))
		}
		return uint32(v), nil
	}
	var err error
	switch {
	case strings.HasPrefix(l, "new file mode "):
		cur.NewMode, err = mode(strings.TrimPrefix(l, "new file mode "))
		cur.OldPath = ""
	case strings.HasPrefix(l, "deleted file mode "):
		cur.OldMode, err = mode(strings.TrimPrefix(l, "deleted file mode "))
		cur.NewPath = ""
	case strings.HasPrefix(l, "old mode "):
		cur.OldMode, err = mode(strings.TrimPrefix(l, "old mode "))
	case strings.HasPrefix(l, "new mode "):
		cur.NewMode, err = mode(strings.TrimPrefix(l, "new mode "))
	case strings.HasPrefix(l, "rename from "), strings.HasPrefix(l, "copy from "):
		cur.OldPath = l[strings.Index(l, "from ")+5:]
	case strings.HasPrefix(l, "rename to "), strings.HasPrefix(l, "copy to "):
		cur.NewPath = l[strings.Index(l, "to ")+3:]
	}
	if err != nil {
		return err
	}
	for _, m := range []uint32{cur.OldMode, cur.NewMode} {
		if m != 0 && m != ModeFile && m != ModeExec && m != ModeSymlink {
			return fmt.Errorf("%w: mode %06o (only regular files and symlinks)", ErrPatchPath, m)
		}
	}
	return nil
}

func splitGitHeader(s string) (a, b string, ok bool) {
	// "a/X b/X": the two halves are equal for everything but renames.
	if !strings.HasPrefix(s, "a/") {
		return "", "", false
	}
	i := strings.Index(s, " b/")
	if i < 0 {
		return "", "", false
	}
	return s[2:i], s[i+3:], true
}

func headerPath(s, prefix string) (string, error) {
	if i := strings.IndexByte(s, '\t'); i >= 0 {
		s = s[:i]
	}
	s = strings.TrimRight(s, " ")
	if s == "/dev/null" {
		return "", nil
	}
	if !strings.HasPrefix(s, prefix) {
		return "", fmt.Errorf("%w: path %q lacks the %s prefix", ErrPatchPath, trunc(s), prefix)
	}
	return s[len(prefix):], nil
}

func parseHunkHeader(l string) (oldLen, newLen int, ok bool) {
	// @@ -a[,b] +c[,d] @@
	rest := strings.TrimPrefix(l, "@@ ")
	end := strings.Index(rest, " @@")
	if end < 0 {
		return 0, 0, false
	}
	parts := strings.Fields(rest[:end])
	if len(parts) != 2 || !strings.HasPrefix(parts[0], "-") || !strings.HasPrefix(parts[1], "+") {
		return 0, 0, false
	}
	count := func(s string) (int, bool) {
		_, c, found := strings.Cut(s, ",")
		if !found {
			return 1, true
		}
		v, err := strconv.Atoi(c)
		return v, err == nil && v >= 0 && v < 1<<24
	}
	o, ok1 := count(parts[0][1:])
	n, ok2 := count(parts[1][1:])
	return o, n, ok1 && ok2
}

func trunc(s string) string {
	if len(s) > 60 {
		return s[:60] + "..."
	}
	return s
}

// ErrNoChange is returned by PatchedPaths callers that need a non-empty patch.
var ErrNoChange = errors.New("tasks: patch changes nothing")

// PatchedPaths returns every path a patch touches (old and new), sorted.
func PatchedPaths(files []FilePatch) []string {
	set := map[string]bool{}
	for _, f := range files {
		if f.OldPath != "" {
			set[f.OldPath] = true
		}
		if f.NewPath != "" {
			set[f.NewPath] = true
		}
	}
	out := make([]string, 0, len(set))
	for p := range set {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}
