//go:build !linux

package docker

import (
	"context"
	"fmt"
	"net"

	"github.com/legorl/legorl/sandbox"
)

func listenInNetns(ctx context.Context, nsPath string, port int) (net.Listener, error) {
	return nil, fmt.Errorf("%w: docker: listening inside a container needs Linux", sandbox.ErrUnsupported)
}

func waitPid(pid int, stop <-chan struct{}) bool { return false }
