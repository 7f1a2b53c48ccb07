package tasks

import "context"

// Workspace is an agent workspace prepared once (PrepareWorkspace) with
// its commit's tree (ReadTree), for the rollouts of one task to share:
// preparing runs git six times (init, a depth-1 fetch with its
// upload-pack and index-pack, update-ref, read-tree, ls-tree and
// cat-file), about 0.2 CPU-seconds here. The folder is never handed to an
// agent: a sandbox is made from a private copy of it (sandbox.Spec).
type Workspace struct {
	// Dir is the prepared workspace.
	Dir string
	// Tree is the commit's tree: the pristine side of a rollout's diff.
	// It is shared, so it is read, never written.
	Tree Tree
}

// NewWorkspace prepares the workspace of commit of the repository at
// snapshot in dir (which must not exist or be empty) and reads its tree.
func NewWorkspace(ctx context.Context, snapshot, commit, dir string) (*Workspace, error) {
	if err := PrepareWorkspace(ctx, snapshot, commit, dir); err != nil {
		return nil, err
	}
	t, err := ReadTree(ctx, snapshot, commit)
	if err != nil {
		return nil, err
	}
	return &Workspace{Dir: dir, Tree: t}, nil
}
