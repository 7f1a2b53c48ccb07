// Package pipelines holds legorl's Beam pipelines, one package each
// (pipelines/rollout), and pipelines/runner, which runs a pipeline on Prism
// in process (bound to the loopback interface), on a portable job server,
// or on the direct runner.
package pipelines
