//go:build !linux

package runner

import "testing"

const netnsChild = "LEGORL_TEST_NETNS_CHILD"

func rerunInNetns(t *testing.T, run string) {
	t.Fatal("no non-loopback address to check the binding from, and no network namespaces to make one")
}

func setUpNetns(t *testing.T) {}
