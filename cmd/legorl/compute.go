package main

import (
	"flag"
	"fmt"
	"strings"

	"github.com/legorl/legorl/policy/backend"
)

// computeFlags are the policy model's compute backend (--compute) and the
// precision of its matrix products (--precision). Device backends are
// compiled in with build tags (compute_cuda.go: -tags cuda).
type computeFlags struct{ name, precision *string }

func addComputeFlags(fs *flag.FlagSet) computeFlags {
	return computeFlags{
		name: fs.String("compute", "cpu", "compute backend of the policy model: "+strings.Join(backend.Names(), ", ")+
			" (cuda needs a binary built with -tags cuda)"),
		precision: fs.String("precision", "fp32", "precision of the matrix products: fp32, or bf16 (inputs rounded to bfloat16, fp32 accumulation; on the cpu too)"),
	}
}

// open opens the chosen backend; the caller closes it.
func (c computeFlags) open() (backend.Backend, error) {
	b, err := backend.Open(*c.name, backend.Options{Precision: *c.precision})
	if err != nil {
		return nil, fmt.Errorf("--compute %s: %w", *c.name, err)
	}
	return b, nil
}
