package kernels

import (
	"sync"
	"sync/atomic"
)

// Block sizes of the Goto/BLIS loop nest. A kc x nr micro-panel of packed B
// stays in L1 while the micro-kernel walks an mc x kc block of packed A in
// L2; the kc x nc packed B block lives in L3 and is shared by all workers.
const (
	blockK = 256  // kc: depth of one packed block
	blockM = 192  // mc target; rounded down to a multiple of the kernel's mr
	blockN = 4096 // nc: columns of one packed B block

	// Products with fewer multiply-adds than this run on one goroutine:
	// starting workers would cost more than it saves.
	parallelMinWork = 1 << 21
	// Products this small skip packing altogether.
	directMaxWork = 1 << 12
)

// microKernel computes one mr x nr tile of C from packed panels:
// C = alpha*Apanel*Bpanel + beta*C, reading C only when beta != 0. Apanel
// holds k steps of mr values, Bpanel k steps of nr values; k >= 1.
type microKernel struct {
	name   string
	mr, nr int
	fn     func(k int, a, b, c *float32, ldc int, alpha, beta float32)
	// dot, when set, returns the sum of x[i]*y[i] over n >= 1 elements;
	// sgemm uses it for the few-rows x W^T products of generation.
	dot func(n int, x, y *float32) float32
	// packA and packB, when set, pack one micro-panel (rows <= mr rows of
	// op(A), or cols <= nr columns of op(B), kb steps deep) from src, which
	// starts at the panel's first element, with ld the stored row stride;
	// trans is the operand's transpose flag. They report false for a panel
	// they leave to the portable loops of packA and packB.
	packA func(trans bool, kb int, dst, src []float32, ld, rows int) bool
	packB func(trans bool, kb int, dst, src []float32, ld, cols int) bool
}

// dotMaxRows is the most rows of C the dot-product path takes: below the
// micro-kernel's height, packing would mostly multiply zero padding.
const dotMaxRows = 4

// sgemm is Sgemm with the micro-kernel and the number of workers given.
func sgemm(kern *microKernel, workers int, transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	checkArgs(transA, transB, m, n, k, a, lda, b, ldb, c, ldc)
	if m == 0 || n == 0 {
		return
	}
	if k == 0 || alpha == 0 {
		scaleC(m, n, beta, c, ldc)
		return
	}
	if m*n*k <= directMaxWork {
		sgemmSmall(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
		return
	}
	if kern.dot != nil && !transA && transB && m <= dotMaxRows {
		sgemmDot(kern, workers, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
		return
	}
	sgemmBlocked(kern, workers, transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

// sgemmDot computes C = alpha*A*B^T + beta*C as one dot product per
// element, rows of A against rows of B, both contiguous: the shape of a
// linear layer applied to a few tokens, where B (the weights) is read once
// and not packed. Columns of C are spread over the workers.
func sgemmDot(kern *microKernel, workers, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	if m*n*k < parallelMinWork {
		workers = 1
	}
	const colsPerChunk = 64
	parallelFor(max(workers, 1), ceilDiv(n, colsPerChunk), func(_, t int) {
		for j := t * colsPerChunk; j < min(n, (t+1)*colsPerChunk); j++ {
			brow := b[j*ldb : j*ldb+k]
			for i := 0; i < m; i++ {
				s := alpha * kern.dot(k, &a[i*lda], &brow[0])
				if beta != 0 {
					s += beta * c[i*ldc+j]
				}
				c[i*ldc+j] = s
			}
		}
	})
}

// sgemmBlocked is the packed, blocked, parallel path of sgemm, for checked
// arguments with m, n, k >= 1 and alpha != 0.
func sgemmBlocked(kern *microKernel, workers int, transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	if m*n*k < parallelMinWork {
		workers = 1
	}
	workers = max(workers, 1)

	mr, nr := kern.mr, kern.nr
	mc := max(blockM/mr, 1) * mr
	kcMax := min(k, blockK)
	ncMax := min(roundUp(n, nr), blockN)

	bBuf := getBuf(kcMax * ncMax)
	defer putBuf(bBuf)
	wbufs := make([]*workerBufs, workers)
	defer func() {
		for _, w := range wbufs {
			if w != nil {
				putBuf(w.a)
				putBuf(w.tile)
			}
		}
	}()
	bufsFor := func(w int) *workerBufs {
		if wbufs[w] == nil {
			wbufs[w] = &workerBufs{a: getBuf(mc * kcMax), tile: getBuf(mr * nr)}
		}
		return wbufs[w]
	}
	mBlocks := ceilDiv(m, mc)

	for jc := 0; jc < n; jc += blockN {
		nb := min(blockN, n-jc)
		nPanels := ceilDiv(nb, nr)
		for pc := 0; pc < k; pc += blockK {
			kb := min(blockK, k-pc)
			bet := beta
			if pc > 0 {
				bet = 1
			}
			bp := (*bBuf)[:nPanels*nr*kb]
			// Pack B: panels in chunks, spread over the workers.
			const panelsPerChunk = 8
			parallelFor(workers, ceilDiv(nPanels, panelsPerChunk), func(_, t int) {
				for jp := t * panelsPerChunk; jp < min(nPanels, (t+1)*panelsPerChunk); jp++ {
					j0 := jp * nr
					packB(kern, bp[jp*nr*kb:(jp+1)*nr*kb], transB, b, ldb, jc+j0, min(nr, nb-j0), pc, kb, nr)
				}
			})
			// Compute: row blocks of C, split further by columns when there
			// are too few row blocks to keep every worker busy.
			jChunks := 1
			if workers > 1 && mBlocks < 2*workers {
				jChunks = min(nPanels, ceilDiv(2*workers, mBlocks))
			}
			parallelFor(workers, mBlocks*jChunks, func(w, t int) {
				bufs := bufsFor(w)
				ib, jch := t/jChunks, t%jChunks
				ic := ib * mc
				mb := min(mc, m-ic)
				ap := (*bufs.a)[:roundUp(mb, mr)*kb]
				packA(kern, ap, transA, a, lda, ic, mb, pc, kb, mr)
				p0, p1 := jch*nPanels/jChunks, (jch+1)*nPanels/jChunks
				tile := (*bufs.tile)[:mr*nr]
				for jp := p0; jp < p1; jp++ {
					j0 := jp * nr
					cols := min(nr, nb-j0)
					bpan := bp[jp*nr*kb : (jp+1)*nr*kb]
					for i0 := 0; i0 < mb; i0 += mr {
						rows := min(mr, mb-i0)
						apan := ap[i0*kb : (i0+mr)*kb]
						ci := (ic+i0)*ldc + jc + j0
						if rows == mr && cols == nr {
							kern.fn(kb, &apan[0], &bpan[0], &c[ci], ldc, alpha, bet)
							continue
						}
						kern.fn(kb, &apan[0], &bpan[0], &tile[0], nr, 1, 0)
						mergeTile(tile, nr, rows, cols, alpha, bet, c[ci:], ldc)
					}
				}
			})
		}
	}
}

// workerBufs are one worker's packed A block and edge-tile scratch.
type workerBufs struct {
	a, tile *[]float32
}

// packA copies rows ic..ic+mb and columns pc..pc+kb of op(A) into dst as
// micro-panels of mr rows: panel by panel, k step by k step, mr values per
// step, with rows past mb zero-filled.
func packA(kern *microKernel, dst []float32, transA bool, a []float32, lda, ic, mb, pc, kb, mr int) {
	for i0 := 0; i0 < mb; i0 += mr {
		rows := min(mr, mb-i0)
		d := dst[i0*kb : (i0+mr)*kb]
		if kern.packA != nil {
			off := (ic+i0)*lda + pc
			if transA {
				off = pc*lda + ic + i0
			}
			if kern.packA(transA, kb, d, a[off:], lda, rows) {
				continue
			}
		}
		if transA {
			for p := 0; p < kb; p++ {
				src := a[(pc+p)*lda+ic+i0:]
				src = src[:rows]
				dp := d[p*mr : p*mr+mr]
				copy(dp, src)
				clear(dp[rows:])
			}
			continue
		}
		for ii := 0; ii < rows; ii++ {
			src := a[(ic+i0+ii)*lda+pc:]
			src = src[:kb]
			for p, v := range src {
				d[p*mr+ii] = v
			}
		}
		if rows < mr {
			for p := 0; p < kb; p++ {
				clear(d[p*mr+rows : p*mr+mr])
			}
		}
	}
}

// packB copies columns j..j+cols and rows pc..pc+kb of op(B) into dst as
// one micro-panel: k step by k step, nr values per step, with columns past
// cols zero-filled.
func packB(kern *microKernel, dst []float32, transB bool, b []float32, ldb, j, cols, pc, kb, nr int) {
	if kern.packB != nil {
		off := pc*ldb + j
		if transB {
			off = j*ldb + pc
		}
		if kern.packB(transB, kb, dst, b[off:], ldb, cols) {
			return
		}
	}
	if transB {
		for jj := 0; jj < cols; jj++ {
			src := b[(j+jj)*ldb+pc:]
			src = src[:kb]
			for p, v := range src {
				dst[p*nr+jj] = v
			}
		}
		if cols < nr {
			for p := 0; p < kb; p++ {
				clear(dst[p*nr+cols : p*nr+nr])
			}
		}
		return
	}
	for p := 0; p < kb; p++ {
		dp := dst[p*nr : p*nr+nr]
		copy(dp, b[(pc+p)*ldb+j:(pc+p)*ldb+j+cols])
		clear(dp[cols:])
	}
}

// mergeTile writes the valid rows x cols corner of an edge tile into C:
// C = alpha*tile + beta*C, not reading C when beta is zero.
func mergeTile(tile []float32, nr, rows, cols int, alpha, beta float32, c []float32, ldc int) {
	for i := 0; i < rows; i++ {
		t := tile[i*nr : i*nr+cols]
		cr := c[i*ldc : i*ldc+cols]
		if beta == 0 {
			for j, v := range t {
				cr[j] = alpha * v
			}
			continue
		}
		for j, v := range t {
			cr[j] = alpha*v + beta*cr[j]
		}
	}
}

// scaleC sets C = beta*C, writing zeros when beta is zero.
func scaleC(m, n int, beta float32, c []float32, ldc int) {
	for i := 0; i < m; i++ {
		row := c[i*ldc : i*ldc+n]
		if beta == 0 {
			clear(row)
			continue
		}
		if beta == 1 {
			continue
		}
		for j := range row {
			row[j] *= beta
		}
	}
}

// sgemmSmall handles tiny products without packing: for each row of C it
// accumulates alpha*A[i,p]*B[p,:] into a scratch row, then merges it.
func sgemmSmall(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	sgemmRef(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

// parallelFor runs body(worker, i) for i in [0, n) on up to workers
// goroutines (the caller's included), which take indices from a shared
// counter; worker is in [0, workers) and no two calls with the same worker
// run at once.
func parallelFor(workers, n int, body func(worker, i int)) {
	workers = min(workers, n)
	if workers <= 1 {
		for i := 0; i < n; i++ {
			body(0, i)
		}
		return
	}
	var next atomic.Int64
	run := func(w int) {
		for {
			i := int(next.Add(1) - 1)
			if i >= n {
				return
			}
			body(w, i)
		}
	}
	var wg sync.WaitGroup
	for w := 1; w < workers; w++ {
		wg.Go(func() { run(w) })
	}
	run(0)
	wg.Wait()
}

// bufPool recycles packing buffers between calls, so a training step's
// thousands of products do not each allocate megabytes.
var bufPool sync.Pool

func getBuf(n int) *[]float32 {
	if p, ok := bufPool.Get().(*[]float32); ok && cap(*p) >= n {
		*p = (*p)[:n]
		return p
	}
	s := make([]float32, n)
	return &s
}

func putBuf(p *[]float32) { bufPool.Put(p) }

func ceilDiv(a, b int) int { return (a + b - 1) / b }

func roundUp(a, b int) int { return ceilDiv(a, b) * b }
