package builtin_test

import (
	"context"
	"fmt"
	"os"

	"github.com/legorl/legorl/tasks/builtin"
)

// Generate a suite of three tasks and list their families and test ids.
func ExampleGenerate() {
	dir, _ := os.MkdirTemp("", "suite")
	defer os.RemoveAll(dir)
	ins, err := builtin.Generate(context.Background(), dir, builtin.Options{N: 3, Seed: 1, Languages: []string{"python"}})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, in := range ins {
		fmt.Println(in.Family, in.Split, in.FailToPass)
	}
	// Output:
	// wrong_operator train [tests/test_billing.py::test_calc_meter]
	// wrong_operator heldout [tests/test_billing.py::test_eval_shelf]
	// off_by_one train [tests/test_payroll.py::test_compute_cargo]
}
