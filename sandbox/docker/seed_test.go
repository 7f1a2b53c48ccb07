package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/legorl/legorl/sandbox"
)

// tarOf builds a tar stream from headers (file bodies from Linkname when
// the type is regular, to keep the table short).
func tarOf(t testing.TB, entries []tar.Header) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, h := range entries {
		body := ""
		if h.Typeflag == tar.TypeReg {
			body, h.Linkname = h.Linkname, ""
			h.Size = int64(len(body))
		}
		if h.Mode == 0 {
			h.Mode = 0o644
		}
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
		tw.Write([]byte(body))
	}
	tw.Close()
	return buf.Bytes()
}

// makeTestImage commits an image whose /testbed holds a small repository.
func makeTestImage(t *testing.T, b *Backend) string {
	t.Helper()
	ctx := context.Background()
	ref := "legorl/test-seed:" + randomHex(4)
	c, err := b.cli.ContainerCreate(ctx, client.ContainerCreateOptions{
		Config: &container.Config{Image: b.opts.Image, Cmd: []string{"true"}, Labels: map[string]string{LabelKey: Owner()}},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer b.cli.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true})
	content := tarOf(t, []tar.Header{
		{Name: "testbed/", Typeflag: tar.TypeDir, Mode: 0o755},
		{Name: "testbed/app.py", Typeflag: tar.TypeReg, Linkname: "print('app')\n"},
		{Name: "testbed/pkg/", Typeflag: tar.TypeDir, Mode: 0o755},
		{Name: "testbed/pkg/run.sh", Typeflag: tar.TypeReg, Linkname: "#!/bin/sh\necho run\n", Mode: 0o755},
		{Name: "testbed/alias.py", Typeflag: tar.TypeSymlink, Linkname: "app.py"},
	})
	if _, err := b.cli.CopyToContainer(ctx, c.ID, client.CopyToContainerOptions{DestinationPath: "/", Content: bytes.NewReader(content)}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.cli.ContainerCommit(ctx, c.ID, client.ContainerCommitOptions{Reference: ref}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.cli.ImageRemove(context.Background(), ref, client.ImageRemoveOptions{Force: true}) })
	return ref
}

func TestWorkspaceFromImage(t *testing.T) {
	b := testBackend(t)
	image := makeTestImage(t, b)
	sb := newBox(t, sandbox.Spec{Image: image, WorkspaceDir: "/testbed"})
	res := run(t, sb, sh("pwd; python3 app.py; python3 alias.py; pkg/run.sh; echo fixed > app.py; id -u"))
	if string(res.Stdout) != "/testbed\napp\napp\nrun\n1000\n" {
		t.Fatalf("got %q (stderr %s)", res.Stdout, res.Stderr)
	}
	if got, _ := os.ReadFile(filepath.Join(sb.HostWorkspace(), "app.py")); string(got) != "fixed\n" {
		t.Errorf("HostWorkspace shows %q, want the agent's change", got)
	}
	if l, err := os.Readlink(filepath.Join(sb.HostWorkspace(), "alias.py")); err != nil || l != "app.py" {
		t.Errorf("symbolic link: %q %v", l, err)
	}
	// A fresh sandbox from the same image starts pristine.
	sb2 := newBox(t, sandbox.Spec{Image: image, WorkspaceDir: "/testbed"})
	if res := run(t, sb2, sh("cat app.py")); string(res.Stdout) != "print('app')\n" {
		t.Errorf("second sandbox sees %q", res.Stdout)
	}
	// An image without the folder gives an empty workspace.
	sb3 := newBox(t, sandbox.Spec{})
	if res := run(t, sb3, sh("ls -A | wc -l")); string(res.Stdout) != "0\n" {
		t.Errorf("workspace not empty: %q", res.Stdout)
	}
}

func TestExtractTar(t *testing.T) {
	tests := []struct {
		name    string
		entries []tar.Header
		wantErr bool
		files   map[string]string // path under root -> content ("" for a folder, "->X" for a link)
	}{
		{"plain", []tar.Header{
			{Name: "top/", Typeflag: tar.TypeDir},
			{Name: "top/a", Typeflag: tar.TypeReg, Linkname: "A"},
			{Name: "top/d/b", Typeflag: tar.TypeReg, Linkname: "B"},
			{Name: "top/l", Typeflag: tar.TypeSymlink, Linkname: "a"},
			{Name: "top/h", Typeflag: tar.TypeLink, Linkname: "top/a"},
		}, false, map[string]string{"a": "A", "d/b": "B", "l": "->a", "h": "A"}},
		{"climbing names are cleaned inside", []tar.Header{
			{Name: "top/../../escape", Typeflag: tar.TypeReg, Linkname: "x"},
		}, false, map[string]string{}},
		{"write through a link out of the root", []tar.Header{
			{Name: "top/out", Typeflag: tar.TypeSymlink, Linkname: "/tmp"},
			{Name: "top/out/pwned", Typeflag: tar.TypeReg, Linkname: "x"},
		}, true, nil},
		{"hard link to outside", []tar.Header{
			{Name: "top/h", Typeflag: tar.TypeLink, Linkname: "/etc/passwd"},
		}, true, nil},
		{"set-id bits dropped", []tar.Header{
			{Name: "top/s", Typeflag: tar.TypeReg, Linkname: "S", Mode: 0o4755},
		}, false, map[string]string{"s": "S"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			root, err := os.OpenRoot(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer root.Close()
			err = extractTar(root, bytes.NewReader(tarOf(t, tc.entries)))
			if (err != nil) != tc.wantErr {
				t.Fatalf("error %v, want error %v", err, tc.wantErr)
			}
			if _, err := os.Stat("/tmp/pwned"); err == nil {
				os.Remove("/tmp/pwned")
				t.Fatal("a file was written outside the root")
			}
			for name, want := range tc.files {
				p := filepath.Join(dir, name)
				if len(want) > 2 && want[:2] == "->" {
					if l, err := os.Readlink(p); err != nil || l != want[2:] {
						t.Errorf("%s: link %q %v", name, l, err)
					}
					continue
				}
				b, err := os.ReadFile(p)
				if err != nil || string(b) != want {
					t.Errorf("%s: %q %v, want %q", name, b, err, want)
				}
				if fi, _ := os.Stat(p); fi != nil && fi.Mode()&(os.ModeSetuid|os.ModeSetgid) != 0 {
					t.Errorf("%s keeps set-id bits: %v", name, fi.Mode())
				}
			}
		})
	}
}

func FuzzExtractTar(f *testing.F) {
	f.Add(tarOf(f, []tar.Header{{Name: "top/a", Typeflag: tar.TypeReg, Linkname: "A"}}))
	f.Add(tarOf(f, []tar.Header{{Name: "top/l", Typeflag: tar.TypeSymlink, Linkname: "../../x"}, {Name: "top/l/y", Typeflag: tar.TypeReg}}))
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		root, err := os.OpenRoot(dir)
		if err != nil {
			t.Fatal(err)
		}
		defer root.Close()
		extractTar(root, bytes.NewReader(data)) // must not panic or escape
	})
}
