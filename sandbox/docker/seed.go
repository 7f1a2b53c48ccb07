package docker

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
)

// seedFromImage fills the empty host folder dst with the contents of dir in
// image, for image-based tasks whose repository lives in the image (a
// SWE-bench image's /testbed). It reads them from a created, never started
// container, so nothing of the image runs. An image without dir leaves dst
// empty. Extraction goes through os.Root: no entry lands outside dst.
func (b *Backend) seedFromImage(ctx context.Context, image, dir, dst string) error {
	created, err := b.cli.ContainerCreate(ctx, client.ContainerCreateOptions{
		Name: "legorl-seed-" + randomHex(8),
		Config: &container.Config{
			Image: image, Cmd: []string{"true"}, Entrypoint: []string{},
			Labels: map[string]string{LabelKey: Owner()}, NetworkDisabled: true,
		},
		HostConfig: &container.HostConfig{NetworkMode: "none"},
	})
	if err != nil {
		if cerrdefs.IsNotFound(err) {
			return fmt.Errorf("%w: %s (build it with scripts/docker/base-image.sh; nothing is pulled)", ErrImageMissing, image)
		}
		return fmt.Errorf("create seed container from %s: %v", image, err)
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30e9)
		defer cancel()
		b.cli.ContainerRemove(rctx, created.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
	}()
	arch, err := b.cli.CopyFromContainer(ctx, created.ID, client.CopyFromContainerOptions{SourcePath: dir})
	if cerrdefs.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read %s from %s: %v", dir, image, err)
	}
	defer arch.Content.Close()
	if !arch.Stat.Mode.IsDir() {
		return fmt.Errorf("%s in %s is not a folder", dir, image)
	}
	root, err := os.OpenRoot(dst)
	if err != nil {
		return err
	}
	defer root.Close()
	if err := extractTar(root, arch.Content); err != nil {
		return fmt.Errorf("read %s from %s: %w", dir, image, err)
	}
	return nil
}

// errTarEntry: an archive entry that cannot be extracted safely.
var errTarEntry = errors.New("bad archive entry")

// extractTar writes a tar stream whose entries all sit under one top
// folder (the engine's archive of a folder) into root, without that top
// folder. Regular files, folders, symbolic and hard links are kept (set-id
// bits dropped); other entry types are skipped.
func extractTar(root *os.Root, r io.Reader) error {
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		name, ok := stripTop(h.Name)
		if !ok {
			return fmt.Errorf("%w: %q", errTarEntry, h.Name)
		}
		if name == "" {
			continue // the top folder itself
		}
		mode := os.FileMode(h.Mode) & 0o777
		switch h.Typeflag {
		case tar.TypeDir:
			if err := root.MkdirAll(name, 0o755); err != nil {
				return err
			}
			if err := root.Chmod(name, mode|0o700); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := root.MkdirAll(path.Dir(name), 0o755); err != nil {
				return err
			}
			f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
			if err != nil {
				return err
			}
			_, err = io.Copy(f, tr)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
		case tar.TypeSymlink:
			if err := root.MkdirAll(path.Dir(name), 0o755); err != nil {
				return err
			}
			if err := root.Symlink(h.Linkname, name); err != nil {
				return err
			}
		case tar.TypeLink:
			old, ok := stripTop(h.Linkname)
			if !ok || old == "" {
				return fmt.Errorf("%w: hard link %q -> %q", errTarEntry, h.Name, h.Linkname)
			}
			if err := root.Link(old, name); err != nil {
				return err
			}
		}
	}
}

// stripTop removes the first element of a slash-separated archive path
// and cleans the rest; false for paths that climb out.
func stripTop(name string) (string, bool) {
	name = path.Clean("/" + name)[1:]
	if name == "" {
		return "", true
	}
	_, rest, _ := strings.Cut(name, "/")
	if rest == ".." || strings.HasPrefix(rest, "../") {
		return "", false
	}
	return rest, true
}
