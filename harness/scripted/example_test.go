package scripted_test

import (
	"context"
	"fmt"
	"os"

	"github.com/legorl/legorl/harness/scripted"
	"github.com/legorl/legorl/tasks"
	"github.com/legorl/legorl/tasks/builtin"
)

// A demonstration of the bash agent on the first task of a generated
// suite's training pools (sft or train): its assistant turns.
func ExampleSolve() {
	dir, _ := os.MkdirTemp("", "suite")
	defer os.RemoveAll(dir)
	ctx := context.Background()
	ins, err := builtin.Generate(ctx, dir, builtin.Options{N: 3, Seed: 1, Languages: []string{"python"}})
	if err != nil {
		fmt.Println(err)
		return
	}
	for i := range ins {
		if ins[i].Split != tasks.SplitSFT && ins[i].Split != tasks.SplitTrain {
			continue
		}
		d, err := scripted.Solve(ctx, dir, &ins[i], "bash", scripted.Options{})
		if err != nil {
			fmt.Println(err)
			return
		}
		for _, m := range d.Messages {
			if m.Role == "assistant" {
				fmt.Printf("%q\n", m.Content)
			}
		}
		return
	}
	// Output:
	// "Let me read the file the issue names.\n\n```bash\ncat eager_pocket.py\n```"
	// "The bug is on line 6. I'll fix it with sed.\n\n```bash\nsed -i 's/        total -= v/        total += v/' eager_pocket.py\n```"
	// "The fix is in place. Submitting.\n\n```bash\necho COMPLETE_TASK_AND_SUBMIT\n```"
}
