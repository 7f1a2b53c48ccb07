package sandbox_test

import (
	"testing"
	"time"

	"github.com/legorl/legorl/sandbox"
)

func TestWithDefaults(t *testing.T) {
	tests := []struct {
		name string
		in   sandbox.Limits
		want sandbox.Limits
	}{
		{"zero", sandbox.Limits{}, sandbox.Limits{MemoryBytes: 2 << 30, Pids: 256, CPUs: 1, TmpBytes: 256 << 20, DiskBytes: 1 << 30, OutputBytes: 1 << 20, Timeout: 10 * time.Minute}},
		{"disk follows a small memory limit", sandbox.Limits{MemoryBytes: 64 << 20}, sandbox.Limits{MemoryBytes: 64 << 20, Pids: 256, CPUs: 1, TmpBytes: 256 << 20, DiskBytes: 32 << 20, OutputBytes: 1 << 20, Timeout: 10 * time.Minute}},
		{"explicit disk kept", sandbox.Limits{MemoryBytes: 64 << 20, DiskBytes: 5 << 30}, sandbox.Limits{MemoryBytes: 64 << 20, Pids: 256, CPUs: 1, TmpBytes: 256 << 20, DiskBytes: 5 << 30, OutputBytes: 1 << 20, Timeout: 10 * time.Minute}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := sandbox.Spec{Limits: tt.in}.WithDefaults()
			if got.Limits != tt.want || got.WorkspaceDir != "/workspace" {
				t.Errorf("got %+v %q, want %+v /workspace", got.Limits, got.WorkspaceDir, tt.want)
			}
		})
	}
}
