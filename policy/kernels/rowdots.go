package kernels

// RowDots sets y[i*ldy+j] = Dot(x[i*ldx:i*ldx+n], w[j*ldw:j*ldw+n]) for
// i < rows and j < cols, with the same bits as those Dot calls: a product
// of a few rows by a weight matrix (or of queries by keys) whose every
// element rounds as it would alone, so a row's result never depends on the
// other rows (the engine's batch invariance). Where the vector Dot runs,
// tiles of 4 rows by 4 weight rows share their loads and their reductions
// (an edge tile repeats its last weight row and keeps only the valid
// part), and the rows left over take sixteen weight rows at a time.
func RowDots(y []float32, ldy int, x []float32, ldx, rows int, w []float32, ldw, cols, n int) {
	if rows == 0 || cols == 0 {
		return
	}
	_ = y[(rows-1)*ldy+cols-1]
	if n == 0 {
		for i := range rows {
			clear(y[i*ldy : i*ldy+cols])
		}
		return
	}
	_ = x[(rows-1)*ldx+n-1] // bounds, before any raw-pointer read
	_ = w[(cols-1)*ldw+n-1]
	tile := vec.dotTile
	if tile == nil {
		for i := range rows {
			for j := range cols {
				y[i*ldy+j] = Dot(x[i*ldx:i*ldx+n], w[j*ldw:j*ldw+n])
			}
		}
		return
	}
	full := rows &^ 3
	j0 := 0
	if panel := vec.dotPanel; panel != nil && full > 0 && cols >= 4 {
		panel(n, &x[0], ldx, full/4, &w[0], ldw, cols/4, &y[0], ldy)
		j0 = cols &^ 3
	}
	if j0 < cols || full < rows {
		rowDotsRest(y, ldy, x, ldx, rows, w, ldw, cols, n, j0)
	}
}

// rowDotsRest is RowDots for what the panel leaves: the weight rows from
// j0 (edge tiles) and the rows past the last full group of four. (Its
// buffer escapes to the heap through the kernel calls, which the panel's
// path thus avoids.)
func rowDotsRest(y []float32, ldy int, x []float32, ldx, rows int, w []float32, ldw, cols, n, j0 int) {
	tile := vec.dotTile
	var out [16]float32
	var scratch []float32 // edge tiles' gathered rows
	full := rows &^ 3
	for ; j0 < cols; j0 += 4 {
		nc := min(4, cols-j0)
		for i0 := 0; i0 < full; i0 += 4 {
			wp, ws := w[j0*ldw:], ldw
			if nc < 4 {
				if scratch == nil {
					scratch = make([]float32, 4*n)
				}
				wp, ws = fourRows(scratch, wp, ldw, nc, n)
			}
			tile(n, &x[i0*ldx], ldx, &wp[0], ws, &out[0])
			for r := range 4 {
				copy(y[(i0+r)*ldy+j0:(i0+r)*ldy+j0+nc], out[r*4:r*4+nc])
			}
		}
	}
	// The rows left over (all of them for one decoding token): sixteen
	// weight rows at a time, then single products.
	for i := full; i < rows; i++ {
		xr := x[i*ldx : i*ldx+n]
		j := 0
		if row := vec.dotRow; row != nil {
			for ; j+16 <= cols; j += 16 {
				row(n, &xr[0], &w[j*ldw], ldw, &out[0])
				yr := y[i*ldy+j : i*ldy+j+16]
				for c := range 16 {
					yr[c] = out[(c%4)*4+c/4]
				}
			}
		}
		for ; j < cols; j++ {
			y[i*ldy+j] = Dot(xr, w[j*ldw:j*ldw+n])
		}
	}
}

// fourRows returns four rows of n floats, stride apart, for a tile: the
// count rows of src (ld apart) followed by repeats of the last. Four rows
// are src itself; one row is src with stride 0; two or three are copied
// into buf.
func fourRows(buf, src []float32, ld, count, n int) ([]float32, int) {
	switch count {
	case 4:
		return src, ld
	case 1:
		return src, 0
	}
	for r := range 4 {
		k := min(r, count-1)
		copy(buf[r*n:(r+1)*n], src[k*ld:k*ld+n])
	}
	return buf, n
}
