//go:build !unix

package agent

import "os/exec"

func setGroup(cmd *exec.Cmd) {}

// killGroup kills the command (there are no process groups to kill).
func killGroup(cmd *exec.Cmd) {
	if cmd.Process != nil {
		cmd.Process.Kill()
	}
}
