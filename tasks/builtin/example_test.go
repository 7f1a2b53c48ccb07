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
	// wrong_operator sft [tests/test_eager_pocket.py::test_compute_orbit]
	// wrong_operator heldout [tests/test_eager_window.py::test_map_grade]
	// off_by_one sft [tests/test_fuzzy_signal.py::test_parse_token]
}
