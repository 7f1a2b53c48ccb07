package kernels_test

import (
	"fmt"

	"github.com/legorl/legorl/policy/kernels"
)

// A 2x3 matrix times the transpose of a 2x3 matrix, into a 2x2 result: the
// y = x W^T shape of a linear layer with W stored [out x in].
func ExampleSgemm() {
	x := []float32{
		1, 2, 3,
		4, 5, 6,
	}
	w := []float32{
		1, 0, 0,
		0, 1, 1,
	}
	y := make([]float32, 2*2)
	kernels.Sgemm(false, true, 2, 2, 3, 1, x, 3, w, 3, 0, y, 2)
	fmt.Println(y)
	// Output: [1 5 4 11]
}
