//go:build linux

// Command gentables writes package initproc's tables as the C init's
// header (go generate ./sandbox/local/initproc runs it):
//
//	gentables OUT
package main

import (
	"fmt"
	"os"

	"github.com/legorl/legorl/sandbox/local/initproc"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: gentables OUT")
		os.Exit(2)
	}
	if err := os.WriteFile(os.Args[1], initproc.CHeader(), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "gentables:", err)
		os.Exit(1)
	}
}
