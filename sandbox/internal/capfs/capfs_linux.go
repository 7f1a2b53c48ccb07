//go:build linux

package capfs

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Mount mounts a tmpfs of size bytes (and Inodes(size) files) on the
// folder dir, which should be empty: nosuid, nodev, its root owned by
// uid:gid with mode 0755.
func Mount(dir string, size int64, uid, gid int) error {
	if size <= 0 {
		return fmt.Errorf("capfs: size %d", size)
	}
	opts := fmt.Sprintf("size=%d,nr_inodes=%d,mode=0755,uid=%d,gid=%d", size, Inodes(size), uid, gid)
	if err := unix.Mount("legorl-workspace", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		return fmt.Errorf("capfs: mount a %d-byte tmpfs on %s: %w", size, dir, err)
	}
	return nil
}

// Resize changes the size (and Inodes(size) files) of the tmpfs Mount put
// on dir: a mount made ahead of need with a default size gets the size a
// sandbox asks for. Shrinking below what the files hold fails.
func Resize(dir string, size int64) error {
	if size <= 0 {
		return fmt.Errorf("capfs: size %d", size)
	}
	opts := fmt.Sprintf("size=%d,nr_inodes=%d", size, Inodes(size))
	if err := unix.Mount("", dir, "", unix.MS_REMOUNT|unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		return fmt.Errorf("capfs: resize the tmpfs on %s to %d bytes: %w", dir, size, err)
	}
	return nil
}

// Unmount detaches the mount on dir (lazily: it goes once nothing uses it,
// at once when nothing does). It returns nil when dir is not a mount point
// or does not exist.
func Unmount(dir string) error {
	err := unix.Unmount(dir, unix.MNT_DETACH)
	if err == nil || errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOENT) {
		return nil
	}
	return fmt.Errorf("capfs: unmount %s: %w", dir, err)
}

// RemoveAll unmounts every mount at or below dir, deepest first, then
// removes dir and what is left in it. A mount that cannot be unmounted is
// an error, and dir is then left in place (never emptied through it).
func RemoveAll(dir string) error {
	mounts, err := Under(dir)
	if err != nil {
		return err
	}
	for _, m := range mounts {
		if err := Unmount(m); err != nil {
			return err
		}
	}
	return os.RemoveAll(dir)
}

// Full reports whether the file system holding path has no free space or
// no free files left (false when path cannot be read).
func Full(path string) bool {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return false
	}
	return st.Bavail == 0 || (st.Files > 0 && st.Ffree == 0)
}

// Under returns the mount points at or below dir in this process's mount
// namespace (from /proc/self/mountinfo), deepest first.
func Under(dir string) ([]string, error) {
	dir = filepath.Clean(dir)
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("capfs: %w", err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		// id parent major:minor root mountpoint options ...
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		mp := unescape(fields[4])
		if mp == dir || strings.HasPrefix(mp, dir+"/") {
			out = append(out, mp)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("capfs: mountinfo: %w", err)
	}
	// Deepest first; a path mounted twice is listed twice.
	sort.SliceStable(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out, nil
}

// unescape decodes mountinfo's octal escapes (\040 for a space, ...).
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
