package doccheck

import (
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// root is the repository root, seen from this package's folder.
const root = "../.."

// TestLinks fails on a relative link in a tracked Markdown file that points
// at no file, or at a heading its file does not have.
func TestLinks(t *testing.T) {
	out, err := exec.Command("git", "-C", root, "ls-files", "*.md").Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	files := strings.Fields(string(out))
	if len(files) == 0 {
		t.Fatal("git ls-files found no Markdown file")
	}
	anchors := map[string]map[string]bool{}
	anchorsOf := func(name string) map[string]bool {
		if a, ok := anchors[name]; ok {
			return a
		}
		f, err := os.Open(filepath.Join(root, name))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		a, err := Anchors(f)
		if err != nil {
			t.Fatal(err)
		}
		anchors[name] = a
		return a
	}
	checked := 0
	for _, name := range files {
		f, err := os.Open(filepath.Join(root, name))
		if err != nil {
			t.Fatal(err)
		}
		links, err := Links(f)
		f.Close()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, l := range links {
			if l.Target == "" || External(l.Target) {
				continue
			}
			checked++
			file, frag, _ := strings.Cut(l.Target, "#")
			target := name
			if file != "" {
				target = path.Clean(path.Join(path.Dir(name), file))
				if strings.HasPrefix(target, "../") || path.IsAbs(file) {
					t.Errorf("%s:%d: link %q leaves the repository", name, l.Line, l.Target)
					continue
				}
				if _, err := os.Stat(filepath.Join(root, target)); err != nil {
					t.Errorf("%s:%d: link %q: no such file %s", name, l.Line, l.Target, target)
					continue
				}
			}
			if frag != "" && strings.HasSuffix(target, ".md") && !anchorsOf(target)[frag] {
				t.Errorf("%s:%d: link %q: %s has no heading #%s", name, l.Line, l.Target, target, frag)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no relative link found: the link scanner is broken")
	}
}

func TestLinksScanner(t *testing.T) {
	doc := strings.Join([]string{
		"See [the docs](docs/A.md) and [B](B.md#part \"title\").",
		"A code span `[x](not/a/link)` and a URL [site](https://example.com).",
		"```sh",
		"echo [y](inside/fence)",
		"```",
		"![img](img/x.png) [mail](mailto:a@b) [here](#local)",
	}, "\n")
	got, err := Links(strings.NewReader(doc))
	if err != nil {
		t.Fatal(err)
	}
	want := []Link{{1, "docs/A.md"}, {1, "B.md#part"}, {2, "https://example.com"}, {6, "img/x.png"}, {6, "mailto:a@b"}, {6, "#local"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Links = %v, want %v", got, want)
	}
	for target, ext := range map[string]bool{"https://x.org/a": true, "mailto:a@b": true, "docs/a.md": false, "#x": false, "a.md#http://": false} {
		if External(target) != ext {
			t.Errorf("External(%q) = %v, want %v", target, !ext, ext)
		}
	}
}

func TestAnchors(t *testing.T) {
	doc := "# Title\n## Remote engines (vLLM, SGLang)\n```\n# not a heading\n```\n## Sandbox: `local` backend\n## Title\n#nospace\n"
	got, err := Anchors(strings.NewReader(doc))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"title": true, "remote-engines-vllm-sglang": true, "sandbox-local-backend": true, "title-1": true}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Anchors = %v, want %v", got, want)
	}
}

// TestLengths holds the pages a newcomer reads first to their size: the
// README an introduction, PERFORMANCE.md one table per component.
func TestLengths(t *testing.T) {
	for name, most := range map[string]int{"README.md": 150, "docs/PERFORMANCE.md": 400} {
		b, err := os.ReadFile(filepath.Join(root, name))
		if err != nil {
			t.Fatal(err)
		}
		if n := strings.Count(string(b), "\n"); n > most {
			t.Errorf("%s has %d lines, more than %d: move detail to a reference page (docs/USAGE.md, docs/ARCHITECTURE.md)", name, n, most)
		}
	}
}
