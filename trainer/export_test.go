package trainer

// SFTStepFunc is sftStep, for the package's external tests and benchmarks.
var SFTStepFunc = sftStep
