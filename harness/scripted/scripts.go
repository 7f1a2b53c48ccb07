package scripted

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"strings"
)

// codexScript: cat the first file with exec_command, one apply_patch per
// file (Codex's own patch format, run as its instructions say: the
// apply_patch command, which Codex takes over and applies itself), then a
// message without a tool call, which ends Codex's turn.
func codexScript(edits []edit) []reply {
	out := []reply{{Content: fmt.Sprintf("Let me read `%s`, where the issue points.", edits[0].Path), Tool: "exec_command",
		Args: object("cmd", "cat "+edits[0].Path)}}
	for _, e := range edits {
		out = append(out, reply{Content: fmt.Sprintf("The bug is at line %d of `%s`. I'll fix it.", e.Line, e.Path), Tool: "exec_command",
			Args: object("cmd", "apply_patch <<'EOF'\n"+codexPatch(e)+"EOF\n")})
	}
	return append(out, reply{Content: "The fix is in place."})
}

// codexPatch is e in Codex's patch format: one hunk replacing the old
// lines by the new ones.
func codexPatch(e edit) string {
	var b strings.Builder
	b.WriteString("*** Begin Patch\n*** Update File: " + e.Path + "\n@@\n")
	for _, l := range strings.Split(e.Old, "\n") {
		b.WriteString("-" + l + "\n")
	}
	for _, l := range strings.Split(e.New, "\n") {
		b.WriteString("+" + l + "\n")
	}
	b.WriteString("*** End Patch\n")
	return b.String()
}

// openCodeScript: read the first file, one edit per file in OpenCode's
// arguments (filePath, oldString, newString), then a message without a
// tool call, which ends OpenCode's run.
func openCodeScript(edits []edit) []reply {
	out := []reply{{Content: fmt.Sprintf("Let me read `%s`, where the issue points.", edits[0].Path), Tool: "read",
		Args: object("filePath", edits[0].Path)}}
	for _, e := range edits {
		out = append(out, reply{Content: fmt.Sprintf("The bug is at line %d of `%s`. I'll fix it.", e.Line, e.Path), Tool: "edit",
			Args: object("filePath", e.Path, "oldString", e.Old, "newString", e.New)})
	}
	return append(out, reply{Content: "The fix is in place."})
}

// Codex's command outputs hold what changes from run to run: a random
// chunk id and the command's wall time ("Chunk ID: 3f9a1c", "Wall time:
// 0.0012 seconds"). Codex is a static native binary, so neither its
// random source nor its clock can be pinned from outside.
var (
	codexChunkID  = regexp.MustCompile(`Chunk ID: [0-9a-f]+`)
	codexWallTime = regexp.MustCompile(`Wall time: [0-9.]+ seconds`)
)

// codexCanon makes the text of a Codex tool output the same bytes on
// every run of the same task: each chunk id becomes hex digits drawn from
// the task and the call (the same length, so the tokens are of the same
// kind as a real one), each wall time zeros in the same format.
func codexCanon(seed string, call int, text string) string {
	n := 0
	text = codexChunkID.ReplaceAllStringFunc(text, func(m string) string {
		sum := sha256.Sum256(fmt.Appendf(nil, "%s/%d/%d", seed, call, n))
		n++
		id := hex.EncodeToString(sum[:])
		return "Chunk ID: " + id[:len(m)-len("Chunk ID: ")]
	})
	return codexWallTime.ReplaceAllStringFunc(text, func(m string) string {
		return strings.Map(func(r rune) rune {
			if r >= '1' && r <= '9' {
				return '0'
			}
			return r
		}, m)
	})
}
