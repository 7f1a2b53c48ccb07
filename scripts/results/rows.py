#!/usr/bin/env python3
"""Print docs/RESULTS.md's before/after rows from the committed summaries.

Usage: scripts/results/rows.py docs/results/NAME.summary.json...
       scripts/results/rows.py docs/results/NAME/WHAT.compare.json...

One markdown row per comparison in each summary (the summary.json that
`legorl run --config docs/results/NAME.json` writes into its work folder):
config, harness, split, mode, pass@1 before -> after, the paired difference
with its 95% interval, McNemar's p, tasks, iterations, the lowest gate
Pearson of the updates. A WHAT.compare.json (`legorl compare --out` of two
evals of a run's policies, made after the run) gives its comparisons, with
the iterations and Pearson of the run's docs/results/NAME.summary.json.
cmd/legorl TestResultsMatchSummaries checks that RESULTS.md holds these
cells.
"""
import json
import os
import sys

print("| config | harness | split | mode | pass@1 before -> after | difference [95% interval] | McNemar p | tasks | RL iterations | lowest gate Pearson |")
print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
for path in sys.argv[1:]:
    s = json.load(open(path))
    if path.endswith(".compare.json"):
        run = os.path.basename(os.path.dirname(os.path.abspath(path)))
        config = run + ".json"
        its = json.load(open(os.path.join(os.path.dirname(path), "..", run + ".summary.json"))).get("iterations") or []
    else:
        config = os.path.basename(path).removesuffix(".summary.json") + ".json"
        its = s.get("iterations") or []
    pearson = min((it["pearson"] for it in its if it.get("trained")), default=None)
    for c in s.get("comparisons") or []:
        print("| `%s` | %s | %s | %s | %.3f -> %.3f | %+.3f [%+.3f, %+.3f] | %.2g | %d | %d | %s |" % (
            config, c["harness"], c["split"], c["mode"], c["before"], c["after"],
            c["diff"], c["ci95_lo"], c["ci95_hi"], c["mcnemar_p"], c["tasks"], len(its),
            "%.12f" % pearson if pearson is not None else "-"))
