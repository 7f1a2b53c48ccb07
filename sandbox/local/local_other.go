//go:build !linux

package local

import (
	"context"
	"fmt"

	"github.com/legorl/legorl/sandbox"
)

// FindInit fails off Linux: the backend needs Linux namespaces.
func FindInit(explicit string) (string, error) {
	return "", fmt.Errorf("%w: local backend needs Linux", sandbox.ErrUnsupported)
}

// Create fails off Linux: the backend needs Linux namespaces.
func (b *Backend) Create(ctx context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
	return nil, fmt.Errorf("%w: local backend needs Linux", sandbox.ErrUnsupported)
}

type holderProc struct{}

// Close does nothing off Linux.
func (b *Backend) Close() error { return nil }

type spawner struct{}
