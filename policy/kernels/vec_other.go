//go:build !amd64 || purego

package kernels

// availableVec has no vector kernels outside amd64 or under the purego
// build tag: the portable loops run.
func availableVec() vecKernels { return vecKernels{} }
