package docker

import "github.com/legorl/legorl/sandbox/internal/capfs"

// A host process that dies without closing its sandboxes leaves their
// workspace folders behind, each with a tmpfs mounted on it (memory, held
// until unmounted). The folders are named legorl-docker-HOSTPID-RANDOM, so
// the next backend to create a sandbox unmounts and removes those whose
// host process is gone (capfs.RemoveOrphans). (Containers are the
// engine's: they carry LabelKey.)

const dirPrefix = "legorl-docker-"

// collectOrphans unmounts and removes the orphaned folders under dir. Best effort.
func collectOrphans(dir string) { capfs.RemoveOrphans(dir, dirPrefix) }
