package tasks_test

import (
	"fmt"

	"github.com/legorl/legorl/tasks"
)

// Diff two trees into a git-style patch, and check it against the policy.
func ExampleDiff() {
	a := tasks.Tree{"calc.py": {Data: []byte("def add(a, b):\n    return a - b\n"), Mode: tasks.ModeFile}}
	b := tasks.Tree{"calc.py": {Data: []byte("def add(a, b):\n    return a + b\n"), Mode: tasks.ModeFile}}
	d, err := tasks.Diff(a, b)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Print(d)
	files, err := tasks.ParsePatch(d, tasks.DefaultPatchLimits)
	fmt.Println(len(files), files[0].Added, files[0].Removed, err)
	// Output:
	// diff --git a/calc.py b/calc.py
	// --- a/calc.py
	// +++ b/calc.py
	// @@ -1,2 +1,2 @@
	//  def add(a, b):
	// -    return a - b
	// +    return a + b
	// 1 1 1 <nil>
}
