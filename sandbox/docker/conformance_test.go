package docker

import (
	"testing"

	"github.com/legorl/legorl/sandbox/sandboxtest"
)

// TestConformance runs the suite every backend passes.
func TestConformance(t *testing.T) {
	sandboxtest.Conformance(t, testBackend(t))
}
