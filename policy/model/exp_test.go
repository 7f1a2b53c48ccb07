package model

import (
	"math"
	"testing"
)

func TestExpShift(t *testing.T) {
	z := []float32{0, -1, 2}
	sum := expShift(z, 0.5, 1)
	want := []float64{math.Exp(-1), math.Exp(-1.5), 1}
	for i, w := range want {
		if math.Abs(float64(z[i])-w) > 1e-7 {
			t.Errorf("z[%d] = %v, want %v", i, z[i], w)
		}
	}
	if math.Abs(sum-(want[0]+want[1]+want[2])) > 1e-6 {
		t.Errorf("sum %v", sum)
	}
	s := make([]float64, 2)
	sigmoidInto(s, []float64{0, 2})
	if s[0] != 0.5 || math.Abs(s[1]-1/(1+math.Exp(-2))) > 1e-15 {
		t.Errorf("sigmoid %v", s)
	}
}
