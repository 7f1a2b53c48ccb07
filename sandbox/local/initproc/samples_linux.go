//go:build linux

package initproc

// Sample is a message of the protocol, named.
type Sample struct {
	Name string
	Message
}

// Samples are one message of each kind the protocol sends, with the
// fields each uses: the protocol tests', and the seed corpus of the C
// init's fuzz target (c/corpus, TestFuzzCorpus).
func Samples() []Sample {
	return []Sample{
		{"hello", Message{Op: OpHello, Version: "c9155c1adace75bf"}},
		{"spawn", Message{Op: OpSpawn, UID: 1<<30 + 12345}},
		{"spawned", Message{Op: OpSpawned, Pid: 4242}},
		{"spawned error", Message{Op: OpSpawned, Error: "clone: operation not permitted"}},
		{"prepared", Message{Op: OpPrepared}},
		{"setup", Message{Op: OpSetup, Setup: &SetupConfig{WorkspaceDir: "/workspace", TmpBytes: 1 << 30, NprocLimit: 576, Seccomp: true}}},
		{"setup with mounts", Message{Op: OpSetup, Setup: &SetupConfig{WorkspaceDir: "/w s", TmpBytes: -1,
			Mounts: []MountEntry{{Target: "/opt/ro", ReadOnly: true}, {Target: "/opt/rw"}}}}},
		{"exec", Message{Op: OpExec, Args: []string{"sh", "-c", "echo 'é' \x00"}, Dir: "/workspace", Env: []string{"PATH=/bin", "X="}}},
		{"kill", Message{Op: OpKill}},
		{"exited", Message{Op: OpExited, Status: 0xff00, TmpFull: true}},
		{"exited not found", Message{Op: OpExited, Error: "nope: executable file not found in $PATH", NotFound: true}},
		{"fault", Message{Op: OpFault, Error: "receive: malformed message"}},
		{"unknown op", Message{Op: 200}},
		{"zero", Message{}},
	}
}

// Encode is the packet Send writes for m.
func Encode(m *Message) []byte { return m.encode() }
