package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// TestDeployManifests parses every Kubernetes manifest of deploy/kubernetes
// and runs each legorl command line in it through the CLI's own flag
// parsing (the line with -h appended: an unknown flag or a bad value fails
// before -h is reached). It checks the manifests' syntax and commands,
// not that they run on a cluster.
func TestDeployManifests(t *testing.T) {
	files, err := filepath.Glob("../../deploy/kubernetes/*.yaml")
	if err != nil || len(files) < 5 {
		t.Fatalf("manifests: %v (%d files)", err, len(files))
	}
	var lines [][]string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		dec := yaml.NewDecoder(strings.NewReader(string(b)))
		for {
			var doc map[string]any
			if err := dec.Decode(&doc); err != nil {
				if err.Error() == "EOF" {
					break
				}
				t.Fatalf("%s: %v", f, err)
			}
			if doc["apiVersion"] == nil || doc["kind"] == nil {
				t.Errorf("%s: a document without apiVersion and kind", f)
			}
			lines = append(lines, manifestCommands(doc)...)
		}
	}
	if len(lines) < 5 {
		t.Fatalf("found %d legorl command lines, want job-server, worker-pool, serve, rollout and train", len(lines))
	}
	vars := strings.NewReplacer("$(POD_IP)", "127.0.0.1", "$ITERATION", "0", "$NEXT", "1")
	for _, l := range lines {
		args := make([]string, len(l))
		for i, a := range l {
			args[i] = vars.Replace(a)
		}
		if code, _, stderr := runCLI(t, testEnv(nil), append(args, "-h")...); code != 0 {
			t.Errorf("legorl %s: exit %d: %s", strings.Join(args, " "), code, lastLine(stderr))
		}
	}
}

// manifestCommands finds the legorl command lines of a manifest: each "command"
// list whose first item is the legorl binary, and each legorl line of a
// /bin/sh script.
func manifestCommands(v any) [][]string {
	var out [][]string
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if list, ok := e.([]any); ok && k == "command" && len(list) > 0 {
				var argv []string
				for _, a := range list {
					argv = append(argv, strings.TrimSpace(toString(a)))
				}
				if strings.HasSuffix(argv[0], "/legorl") {
					out = append(out, argv[1:])
				} else if argv[0] == "/bin/sh" {
					script := strings.ReplaceAll(argv[len(argv)-1], "\\\n", " ")
					for _, line := range strings.Split(script, "\n") {
						if f := strings.Fields(line); len(f) > 0 && strings.HasSuffix(f[0], "/legorl") {
							out = append(out, f[1:])
						}
					}
				}
				continue
			}
			out = append(out, manifestCommands(e)...)
		}
	case []any:
		for _, e := range x {
			out = append(out, manifestCommands(e)...)
		}
	}
	return out
}

func toString(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	return ""
}

func lastLine(s string) string {
	l := strings.Split(strings.TrimSpace(s), "\n")
	return l[len(l)-1]
}
