#!/usr/bin/env python3
"""Print pass rates by task template from rollout tables.

Usage: scripts/results/templates.py [--per-run] SUITE ROLLOUTS.csv...

SUITE is a built-in suite's tasks.jsonl (`legorl tasks generate`; each task
names its template, family/name); each ROLLOUTS.csv is a run's rollouts
table (`legorl export --table rollouts --format csv`). One row per template,
one column per (run, policy version), or with --per-run per run (an RL
run's iterations together): passed/rollouts and the rate. A
family's pass@1 can hide templates that are solved always and never; this
shows them. A suite made before templates were named can be remade with
the same n and seed: instance ids, and so the join, are the same.
"""
import argparse
import collections
import csv
import io
import json
import sys

ap = argparse.ArgumentParser(description="pass rates by task template from rollout tables")
ap.add_argument("--per-run", action="store_true", help="one column per run, not per (run, policy version)")
ap.add_argument("suite", help="the suite's tasks.jsonl")
ap.add_argument("rollouts", nargs="+", help="rollouts tables as CSV (legorl export)")
args = ap.parse_args()


def read(path):
    """A file's text, or a one-line exit naming it."""
    try:
        with open(path, newline="") as f:
            return f.read()
    except OSError as e:
        sys.exit(f"templates.py: {path}: {e.strerror}")


template = {}
for line in read(args.suite).splitlines():
    t = json.loads(line)
    template[t["instance_id"]] = t.get("template") or t.get("family", "") + "/?"
cells = collections.defaultdict(lambda: [0, 0])  # (template, column) -> passed, rollouts
columns = []
for path in args.rollouts:
    for r in csv.DictReader(io.StringIO(read(path))):
        if r["status"] != "completed":
            continue  # masked: an environment failure, not scored
        if r["task_id"] not in template:
            sys.exit(f"templates.py: {path}: task {r['task_id']} is not in {args.suite}")
        col = r["run_id"] if args.per_run else f"{r['run_id']} v{r['policy_version']}"
        if col not in columns:
            columns.append(col)
        c = cells[(template[r["task_id"]], col)]
        c[0] += int(float(r["reward"] or 0) >= 1)
        c[1] += 1
print("| template | " + " | ".join(columns) + " |")
print("| --- |" + " --- |" * len(columns))
for t in sorted({t for t, _ in cells}):
    row = []
    for col in columns:
        p, n = cells.get((t, col), (0, 0))
        row.append(f"{p}/{n} ({p / n:.2f})" if n else "-")
    print(f"| {t} | " + " | ".join(row) + " |")
