//go:build cuda

package cuda

import (
	"errors"
	"fmt"
	"math/bits"

	"gorgonia.org/cu"
)

// minBucket is the smallest allocation of the pool, as a power of two.
const minBucket = 8 // 256 bytes

// pool keeps freed device buffers for reuse, bucketed by size rounded up
// to a power of two, so the operations of a pass, which repeat the same
// shapes layer after layer, stop allocating after the first layer. It is
// used under Backend.mu with the context current.
type pool struct {
	free  map[int][]cu.DevicePtr // bucket -> buffers ready for reuse
	size  map[cu.DevicePtr]int   // every live allocation -> its bucket
	total int64                  // bytes allocated from the device
}

// bucketOf returns the bucket of an n-byte request.
func bucketOf(n int64) int {
	if n <= 1<<minBucket {
		return minBucket
	}
	return bits.Len64(uint64(n - 1))
}

// get returns a buffer of at least n bytes. When the device is out of
// memory it frees the cached buffers and tries once more.
func (p *pool) get(n int64) (cu.DevicePtr, error) {
	if p.free == nil {
		p.free, p.size = map[int][]cu.DevicePtr{}, map[cu.DevicePtr]int{}
	}
	k := bucketOf(n)
	if l := p.free[k]; len(l) > 0 {
		d := l[len(l)-1]
		p.free[k] = l[:len(l)-1]
		return d, nil
	}
	d, err := cu.MemAlloc(int64(1) << k)
	if err != nil && errors.Is(err, cu.OutOfMemory) {
		if terr := p.trim(); terr != nil {
			return 0, terr
		}
		d, err = cu.MemAlloc(int64(1) << k)
	}
	if err != nil {
		return 0, fmt.Errorf("cuMemAlloc of %d bytes (%d held): %w", int64(1)<<k, p.total, err)
	}
	p.size[d] = k
	p.total += int64(1) << k
	return d, nil
}

// put returns a buffer from get to the pool.
func (p *pool) put(d cu.DevicePtr) {
	if k, ok := p.size[d]; ok {
		p.free[k] = append(p.free[k], d)
	}
}

// trim frees the cached buffers.
func (p *pool) trim() error {
	var first error
	for k, l := range p.free {
		for _, d := range l {
			if err := cu.MemFree(d); err != nil && first == nil {
				first = fmt.Errorf("cuMemFree: %w", err)
			}
			delete(p.size, d)
			p.total -= int64(1) << k
		}
		delete(p.free, k)
	}
	return first
}

// close frees every buffer; none may be in use.
func (p *pool) close() error {
	var first error
	for d := range p.size {
		if err := cu.MemFree(d); err != nil && first == nil {
			first = fmt.Errorf("cuMemFree: %w", err)
		}
	}
	p.free, p.size, p.total = nil, nil, 0
	return first
}
