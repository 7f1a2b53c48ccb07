package model

import "math"

// expShift sets z[j] = e^(z[j]*scale - shift) and returns the sum of the
// results in float64. (math.Exp is assembly on amd64; a float32 polynomial
// exp measured no faster, so there is one path.)
func expShift[T Float](z []T, scale, shift float64) float64 {
	var sum float64
	for j, v := range z {
		e := math.Exp(float64(v)*scale - shift)
		z[j] = T(e)
		sum += e
	}
	return sum
}

// sigmoidInto sets dst[i] = 1 / (1 + e^-x[i]).
func sigmoidInto[T Float](dst, x []T) {
	for i, v := range x {
		dst[i] = T(1 / (1 + math.Exp(-float64(v))))
	}
}
