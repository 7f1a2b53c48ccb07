//go:build !linux

package runner

import (
	"context"
	"fmt"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/runners/prism"
)

// startPrism refuses to start Prism where its listener cannot be bound to
// the loopback device (see prism_linux.go): use a job server of your own
// with the universal runner.
func startPrism(ctx context.Context) (string, error) {
	_ = prism.Options{}
	return "", fmt.Errorf("%w: the in-process Prism runner needs Linux (its job service listens on every interface); use --runner universal", ErrOptions)
}

func startPrismOn(ctx context.Context, port int, device string) (string, error) {
	return startPrism(ctx)
}

// PrismEndpoint is startPrism.
func PrismEndpoint(ctx context.Context) (string, error) { return startPrism(ctx) }
