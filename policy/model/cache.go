package model

import (
	"fmt"
)

// kvCache holds the rotated keys and the values of every layer for the
// positions processed so far: [n, KV*hd] per layer.
type kvCache[T Float] struct {
	k, v [][]T
	n    int
}

// append adds a block of keys and values to layer l and returns the whole
// cache of that layer.
func (c *kvCache[T]) append(l int, k, v []T) ([]T, []T) {
	c.k[l] = append(c.k[l], k...)
	c.v[l] = append(c.v[l], v...)
	return c.k[l], c.v[l]
}

// Cache is an incremental decoding state: the keys and values of a token
// prefix, so that each new token costs one position of compute. It is
// what a generation engine extends token by token and truncates to reuse
// a shared prefix. A Cache is not safe for concurrent use; many caches may
// share one Model.
type Cache struct {
	m    *Model
	kv   kvCache[float32]
	rope ropeTable[float32]
}

// NewCache returns an empty cache for m.
func (m *Model) NewCache() *Cache {
	L := m.cfg.NumHiddenLayers
	return &Cache{m: m, kv: kvCache[float32]{k: make([][]float32, L), v: make([][]float32, L)}}
}

// Len returns the number of positions in the cache.
func (c *Cache) Len() int { return c.kv.n }

// Truncate keeps the first n positions, to reuse a prefix.
func (c *Cache) Truncate(n int) error {
	if n < 0 || n > c.kv.n {
		return fmt.Errorf("%w: truncate to %d positions, the cache holds %d", ErrInput, n, c.kv.n)
	}
	cfg := c.m.cfg
	w := n * cfg.NumKeyValueHeads * cfg.HeadDim
	for l := range c.kv.k {
		c.kv.k[l], c.kv.v[l] = c.kv.k[l][:w], c.kv.v[l][:w]
	}
	c.kv.n = n
	return nil
}

// Fork returns a new cache holding a copy of the first n positions of c:
// another sequence that starts with the same tokens continues from there
// without running them again (prefix caching). c is unchanged.
func (c *Cache) Fork(n int) (*Cache, error) {
	if n < 0 || n > c.kv.n {
		return nil, fmt.Errorf("%w: fork %d positions, the cache holds %d", ErrInput, n, c.kv.n)
	}
	cfg := c.m.cfg
	w := n * cfg.NumKeyValueHeads * cfg.HeadDim
	f := c.m.NewCache()
	for l := range c.kv.k {
		f.kv.k[l] = append(make([]float32, 0, w+w/4), c.kv.k[l][:w]...)
		f.kv.v[l] = append(make([]float32, 0, w+w/4), c.kv.v[l][:w]...)
	}
	f.kv.n = n
	f.rope = c.rope // never written in place: growing it makes a new table
	return f, nil
}

// Extend runs ids at the next positions of the cache and returns the
// logits (before temperature, one per id of the model's Support) that
// predict the token after the last of them, and the routing of the new
// tokens, [len(ids)][MoE layers][k] (nil for a dense model). routing,
// when not nil, is replayed for the new tokens. The logits are those the
// full forward pass computes for the same token sequence, up to float32
// rounding.
func (c *Cache) Extend(ids []int32, routing [][][]int16) ([]float32, [][][]int16, error) {
	cfg := &c.m.cfg
	if len(ids) == 0 {
		return nil, nil, fmt.Errorf("%w: no tokens to extend the cache with", ErrInput)
	}
	if n := c.kv.n + len(ids); cfg.MaxPositionEmbeddings > 0 && n > cfg.MaxPositionEmbeddings {
		return nil, nil, fmt.Errorf("%w: %d positions exceed max_position_embeddings %d", ErrInput, n, cfg.MaxPositionEmbeddings)
	}
	if err := cfg.check(0, Sequence{Prompt: ids, Routing: routing}, c.m.support); err != nil {
		return nil, nil, err
	}
	need := c.kv.n + len(ids)
	if len(c.rope.cos) < need*cfg.HeadDim/2 {
		c.rope = c.m.ropeTable(need)
	}
	ps := &pass[float32]{c: cfg, ops: c.m.be, p: c.m.p, V: c.m.support, ids: ids, S: len(ids), P: len(ids), temp: 1, replay: routing,
		block: attnBlock, pos0: c.kv.n, kv: &c.kv, rope: c.rope}
	ps.forward()
	c.kv.n = need
	d := cfg.HiddenSize
	last := ps.xFn[(len(ids)-1)*d:]
	logits := linear(c.m.be, last, 1, d, c.m.p.lmHead.data[:c.m.support*d], c.m.support)
	if err := c.m.backendErr(); err != nil {
		_ = c.Truncate(need - len(ids)) // drop the new positions
		return nil, nil, err
	}
	return logits, ps.routes, nil
}
