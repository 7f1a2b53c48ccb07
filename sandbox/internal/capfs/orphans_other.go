//go:build !unix

package capfs

// Orphaned is never true without Unix process ids to test.
func Orphaned(name, prefix string) bool { return false }

// RemoveOrphans does nothing without Unix process ids to test.
func RemoveOrphans(dir, prefix string) {}
