package kernels

// RowDots sets y[i*ldy+j] = Dot(x[i*n:(i+1)*n], w[j*n:(j+1)*n]) for i < rows
// and j < cols, with the same bits as those Dot calls: a product of a few
// rows by a weight matrix whose every element rounds as it would alone,
// so a row's result never depends on the other rows (the engine's batch
// invariance). Where the AVX-512 Dot runs and n is a multiple of 16, tiles
// of 2 rows by 3 weight rows share their loads (one read of each weight row
// per two input rows, instead of one per element); elsewhere it is Dot per
// element.
func RowDots(y []float32, ldy int, x []float32, rows int, w []float32, cols, n int) {
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
	_ = x[rows*n-1]
	_ = w[cols*n-1]
	i, j0 := 0, 0
	if tile := vec.dot2x3; tile != nil && n%16 == 0 {
		var out [6]float32
		for j0 = 0; j0+3 <= cols; j0 += 3 {
			for i = 0; i+2 <= rows; i += 2 {
				tile(n, &x[i*n], n, &w[j0*n], n, &out[0])
				y0, y1 := y[i*ldy+j0:i*ldy+j0+3], y[(i+1)*ldy+j0:(i+1)*ldy+j0+3]
				y0[0], y0[1], y0[2] = out[0], out[1], out[2]
				y1[0], y1[1], y1[2] = out[3], out[4], out[5]
			}
			for ; i < rows; i++ { // an odd last row
				for j := j0; j < j0+3; j++ {
					y[i*ldy+j] = Dot(x[i*n:(i+1)*n], w[j*n:(j+1)*n])
				}
			}
		}
	}
	for j := j0; j < cols; j++ { // the columns left over
		wr := w[j*n : (j+1)*n]
		for i := range rows {
			y[i*ldy+j] = Dot(x[i*n:(i+1)*n], wr)
		}
	}
}
