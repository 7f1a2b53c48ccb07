package kernels

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestDot compares Dot and its portable loop with a float64 sum on lengths
// that cover every branch of the kernels (blocks of 64, of 16, scalar
// tails) and checks that the result depends on the operands only.
func TestDot(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{0, 1, 3, 4, 15, 16, 17, 63, 64, 65, 100, 256, 1000} {
		x, y := make([]float32, n), make([]float32, n+5)
		for i := range x {
			x[i] = rng.Float32()*2 - 1
		}
		for i := range y {
			y[i] = rng.Float32()*2 - 1
		}
		var want, mag float64
		for i := range x {
			want += float64(x[i]) * float64(y[i])
			mag += math.Abs(float64(x[i]) * float64(y[i]))
		}
		tol := 1e-6 * (mag + 1)
		for name, got := range map[string]float32{"Dot": Dot(x, y), "generic": dotGeneric(x, y[:n])} {
			if math.Abs(float64(got)-want) > tol {
				t.Errorf("n=%d %s = %g, want %g", n, name, got, want)
			}
		}
		if a, b := Dot(x, y), Dot(append([]float32(nil), x...), y[:n]); math.Float32bits(a) != math.Float32bits(b) {
			t.Errorf("n=%d: Dot is not a function of its operands: %g vs %g", n, a, b)
		}
	}
}

func TestDotShortY(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("Dot with y shorter than x did not panic")
		}
	}()
	Dot(make([]float32, 20), make([]float32, 19))
}
