//go:build linux

package local

import "github.com/legorl/legorl/sandbox"

// Internals for the external tests: what teardown must remove.

func HostUID(s sandbox.Sandbox) int       { return s.(*localSandbox).uid }
func HolderPid(s sandbox.Sandbox) int     { return s.(*localSandbox).holderPid }
func SandboxDir(s sandbox.Sandbox) string { return s.(*localSandbox).dir }
func CgroupDirs(s sandbox.Sandbox) []string {
	var out []string
	if cg := s.(*localSandbox).cg; cg != nil {
		for _, d := range cg.dirs {
			out = append(out, d)
		}
	}
	return out
}

// ControlFD is the host's end of the sandbox's control socket to its init.
func ControlFD(s sandbox.Sandbox) int { return s.(*localSandbox).ctlFD }
