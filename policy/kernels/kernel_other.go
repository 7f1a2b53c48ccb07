//go:build !amd64 || purego

package kernels

// availableKernels lists the micro-kernels this build can run: only the
// portable one outside amd64 or under the purego build tag.
func availableKernels() []*microKernel {
	return []*microKernel{genericKernel}
}
