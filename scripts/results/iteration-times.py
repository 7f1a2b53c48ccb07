#!/usr/bin/env python3
"""Print the rollout and update seconds of a range of a run's iterations.

Usage: scripts/results/iteration-times.py LOG FIRST END

LOG is a `legorl run` log (docs/results/NAME/log.txt); the iterations
FIRST <= i < END count. Each iteration's summary line ("iteration I: policy
vN: ... rollouts Rs, update Us (...)") gives R and U; the script prints the
number of iterations, and the range and median of each.
"""
import re
import statistics
import sys

if len(sys.argv) != 4:
    sys.exit("usage: iteration-times.py LOG FIRST END")
path, first, end = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
line = re.compile(r"iteration (\d+): policy v\d+: .*rollouts (\d+)s, update (\d+)s")
rollouts, updates = [], []
for l in open(path):
    m = line.search(l)
    if m and first <= int(m.group(1)) < end:
        rollouts.append(int(m.group(2)))
        updates.append(int(m.group(3)))
if not updates:
    sys.exit(f"iteration-times.py: no iteration {first}-{end - 1} in {path}")
print(f"{path} iterations {first}-{end - 1} ({len(updates)}): rollouts {min(rollouts)}-{max(rollouts)} s, median {statistics.median(rollouts)}; "
      f"update {min(updates)}-{max(updates)} s, median {statistics.median(updates)}")
