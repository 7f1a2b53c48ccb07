#!/usr/bin/env python3
"""Print, per RL iteration, how many of its tasks earlier iterations rolled out.

Usage: scripts/results/repeats.py ROLLOUTS.csv

ROLLOUTS.csv is an RL run's rollouts table (`legorl export --table rollouts
--format csv --run RUN`). One line per iteration: its tasks, those no
earlier iteration rolled out (new), and the distinct tasks so far. A
policy trained on repeated tasks can learn them rather than the skill;
runs since `repeated_tasks` was added to the summary count this
themselves, this counts it for the runs before.
"""
import collections
import csv
import sys

if len(sys.argv) != 2:
    sys.exit("usage: repeats.py ROLLOUTS.csv")
try:
    with open(sys.argv[1], newline="") as f:
        rows = list(csv.DictReader(f))
except OSError as e:
    sys.exit(f"repeats.py: {sys.argv[1]}: {e.strerror}")
by_iter = collections.defaultdict(set)
for r in rows:
    if "iteration" not in r or "task_id" not in r:
        sys.exit(f"repeats.py: {sys.argv[1]}: not a rollouts table (no iteration or task_id column)")
    by_iter[int(r["iteration"])].add(r["task_id"])
seen = set()
print("| iteration | tasks | new | repeated | distinct so far |")
print("| --- | --- | --- | --- | --- |")
for i in sorted(by_iter):
    tasks = by_iter[i]
    new = tasks - seen
    seen |= tasks
    print(f"| {i} | {len(tasks)} | {len(new)} | {len(tasks) - len(new)} | {len(seen)} |")
