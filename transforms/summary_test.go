package transforms

import (
	"testing"
	"time"
)

// TestReportSummary: the one line `legorl rollout` prints, with and
// without masked rollouts and elapsed time.
func TestReportSummary(t *testing.T) {
	for _, tc := range []struct {
		name string
		rep  Report
		took time.Duration
		want string
	}{
		{"masked and reused", Report{RunID: "r", Iteration: 2, Launched: 8, Completed: 6, Masked: 2, MaskedBy: []string{"harness_error=1", "timeout=1"},
			Passed: 3, PassRate: 0.5, Ran: 6, Reused: 2, Rejected: make([]Rejected, 1), ManifestVersion: 3}, 2 * time.Minute,
			"run r iteration 2: launched 8, completed 6, masked 2 (harness_error=1 timeout=1), pass rate 0.500 (3/6), 3.0 rollouts/min (ran 6, reused 2, 2m0s), rejected 1, manifest v3"},
		{"nothing ran", Report{RunID: "r"}, 0,
			"run r iteration 0: launched 0, completed 0, masked 0 (none), pass rate 0.000 (0/0), 0.0 rollouts/min (ran 0, reused 0, 0s), rejected 0, manifest v0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.rep.Summary(tc.took); got != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}
