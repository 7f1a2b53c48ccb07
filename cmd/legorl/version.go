package main

import (
	"context"
	"fmt"
	"io"
	"runtime"

	"github.com/legorl/legorl/schemas"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func runVersion(ctx context.Context, env *environ, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("version", stderr)
	if err := parseFlags(fs, stderr, args); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "legorl %s (schema %d, %s %s/%s)\n", version, schemas.Version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return nil
}
