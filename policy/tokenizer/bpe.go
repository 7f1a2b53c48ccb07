package tokenizer

import "sync"

// cache remembers the ids of recently seen pieces. Pieces repeat a lot in
// text (words, indentation), so most of them skip the merge loop.
type cache struct {
	mu sync.RWMutex
	m  map[string][]int32
}

const (
	cacheEntries  = 1 << 16 // the cache is emptied when it reaches this size
	cacheMaxPiece = 256     // longer pieces are not cached
)

func newCache() *cache { return &cache{m: make(map[string][]int32)} }

func (c *cache) get(piece string) ([]int32, bool) {
	c.mu.RLock()
	ids, ok := c.m[piece]
	c.mu.RUnlock()
	return ids, ok
}

func (c *cache) put(piece string, ids []int32) {
	c.mu.Lock()
	if len(c.m) >= cacheEntries {
		clear(c.m)
	}
	c.m[piece] = ids
	c.mu.Unlock()
}

// appendPiece appends the ids of one pre-tokenized piece.
func (t *Tokenizer) appendPiece(out []int32, piece string) []int32 {
	if len(piece) == 1 {
		return append(out, t.byteID[piece[0]])
	}
	if t.whole != nil {
		if id, ok := t.whole[piece]; ok {
			return append(out, id)
		}
	}
	cacheable := len(piece) <= cacheMaxPiece
	if cacheable {
		if ids, ok := t.cache.get(piece); ok {
			return append(out, ids...)
		}
	}
	n := len(out)
	for i := 0; i < len(piece); i++ {
		out = append(out, t.byteID[piece[i]])
	}
	syms := out[n:]
	if len(syms) <= smallWord {
		syms = t.mergeSmall(syms)
	} else {
		syms = t.mergeHeap(syms)
	}
	out = out[:n+len(syms)]
	if cacheable {
		t.cache.put(piece, append([]int32(nil), syms...))
	}
	return out
}

const (
	smallWord = 48      // pieces up to this many bytes use mergeSmall
	noRank    = 1 << 30 // rank of a pair that does not merge
)

func (t *Tokenizer) rank(a, b int32) (int32, int32) {
	if m, ok := t.merges[pairKey(a, b)]; ok {
		return m.rank, m.id
	}
	return noRank, -1
}

// mergeSmall applies the merges to syms in place, lowest rank first and
// leftmost first among equal ranks, by rescanning the pair ranks; it is the
// fastest way for short pieces. It returns the merged prefix of syms.
func (t *Tokenizer) mergeSmall(syms []int32) []int32 {
	var ranks, ids [smallWord]int32
	n := len(syms)
	for i := 0; i+1 < n; i++ {
		ranks[i], ids[i] = t.rank(syms[i], syms[i+1])
	}
	for n > 1 {
		best, bestRank := -1, int32(noRank)
		for i := 0; i+1 < n; i++ {
			if ranks[i] < bestRank {
				best, bestRank = i, ranks[i]
			}
		}
		if best < 0 {
			break
		}
		syms[best] = ids[best]
		copy(syms[best+1:n], syms[best+2:n])
		copy(ranks[best+1:n-1], ranks[best+2:n])
		copy(ids[best+1:n-1], ids[best+2:n])
		n--
		if best > 0 {
			ranks[best-1], ids[best-1] = t.rank(syms[best-1], syms[best])
		}
		if best+1 < n {
			ranks[best], ids[best] = t.rank(syms[best], syms[best+1])
		}
	}
	return syms[:n]
}

// candidate is a possible merge of the symbol at pos with the next one.
type candidate struct {
	rank, pos   int32
	left, right int32 // the ids it was computed for, to detect stale entries
}

func (a candidate) less(b candidate) bool {
	return a.rank < b.rank || (a.rank == b.rank && a.pos < b.pos)
}

// mergeHeap applies the merges to syms in place with a priority queue over
// a linked list of symbols: O(n log n) for long pieces (CJK runs, long
// punctuation or whitespace runs). Same result as mergeSmall.
func (t *Tokenizer) mergeHeap(syms []int32) []int32 {
	n := len(syms)
	next := make([]int32, n) // -1 at the end
	prev := make([]int32, n) // -1 at the start
	alive := make([]bool, n)
	var h []candidate
	push := func(c candidate) {
		h = append(h, c)
		for i := len(h) - 1; i > 0; {
			p := (i - 1) / 2
			if !h[i].less(h[p]) {
				break
			}
			h[i], h[p] = h[p], h[i]
			i = p
		}
	}
	pop := func() candidate {
		top := h[0]
		last := len(h) - 1
		h[0] = h[last]
		h = h[:last]
		for i := 0; ; {
			l, r, m := 2*i+1, 2*i+2, i
			if l < len(h) && h[l].less(h[m]) {
				m = l
			}
			if r < len(h) && h[r].less(h[m]) {
				m = r
			}
			if m == i {
				break
			}
			h[i], h[m] = h[m], h[i]
			i = m
		}
		return top
	}
	consider := func(pos int32) {
		nx := next[pos]
		if nx < 0 {
			return
		}
		if r, _ := t.rank(syms[pos], syms[nx]); r != noRank {
			push(candidate{rank: r, pos: pos, left: syms[pos], right: syms[nx]})
		}
	}
	for i := range n {
		next[i], prev[i], alive[i] = int32(i+1), int32(i-1), true
	}
	next[n-1] = -1
	for i := range n - 1 {
		consider(int32(i))
	}
	for len(h) > 0 {
		c := pop()
		nx := next[c.pos]
		if !alive[c.pos] || nx < 0 || syms[c.pos] != c.left || syms[nx] != c.right {
			continue // stale
		}
		_, id := t.rank(c.left, c.right)
		syms[c.pos] = id
		alive[nx] = false
		next[c.pos] = next[nx]
		if next[nx] >= 0 {
			prev[next[nx]] = c.pos
		}
		if p := prev[c.pos]; p >= 0 {
			consider(p)
		}
		consider(c.pos)
	}
	out := syms[:0]
	for i := int32(0); i >= 0; i = next[i] {
		out = append(out, syms[i])
	}
	return out
}
