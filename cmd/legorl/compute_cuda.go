//go:build cuda

package main

// The CUDA backend, in binaries built with -tags cuda (`--compute cuda`).
// Such a binary needs an NVIDIA driver to start: gorgonia.org/cu initialises
// it when the program loads (docs/ARCHITECTURE.md, "Compute backends").
import _ "github.com/legorl/legorl/policy/backend/cuda"
