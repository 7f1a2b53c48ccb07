package trainer

// SFTStepFunc is sftStep, for the package's external tests and benchmarks.
var SFTStepFunc = sftStep

// CopyDrillsFunc is copyDrills, DrillTokens drillTokens and DrillRand
// drillRand, for the package's external tests.
var (
	CopyDrillsFunc = copyDrills
	DrillTokens    = drillTokens
	DrillRand      = drillRand
)
