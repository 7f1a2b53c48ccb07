package grade_test

import (
	"context"
	"fmt"
	"os"

	"github.com/legorl/legorl/sandbox/grade"
	"github.com/legorl/legorl/sandbox/local"
	"github.com/legorl/legorl/tasks/builtin"
)

// Grade the gold patch and the untouched base of a generated task.
func ExampleGrader_Grade() {
	dir, _ := os.MkdirTemp("", "suite")
	defer os.RemoveAll(dir)
	ctx := context.Background()
	ins, err := builtin.Generate(ctx, dir, builtin.Options{N: 1, Seed: 1, Languages: []string{"python"}})
	if err != nil {
		fmt.Println(err)
		return
	}
	g := grade.New(local.New(local.Options{}), grade.Options{})
	for _, diff := range []string{ins[0].Patch, ""} {
		gr, err := g.Grade(ctx, dir, &ins[0], diff)
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(gr.Reward, gr.Outcome, gr.F2PFailed)
	}
	// Output:
	// 1 completed []
	// 0 completed [tests/test_eager_pocket.py::test_compute_orbit]
}
