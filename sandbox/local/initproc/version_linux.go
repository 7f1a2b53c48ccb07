//go:build linux

package initproc

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
)

// sources are the C init's sources, in the order Version hashes them.
//
//go:embed c/init.c c/tables.h
var sources embed.FS

// Version names the source of the init: the first 16 hex digits of the
// SHA-256 of c/init.c followed by c/tables.h. The build computes it the same
// way (scripts/lib/build-init.sh) and compiles it into the init, which
// greets the host with it; the host, which embeds the same files, starts
// an init only when the two agree, so that a legorl-sandbox-init built
// from other source is never used.
func Version() string {
	h := sha256.New()
	for _, f := range []string{"c/init.c", "c/tables.h"} { // not the fuzz target beside them
		b, err := sources.ReadFile(f)
		if err != nil {
			panic(err) // embedded: cannot happen
		}
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}
