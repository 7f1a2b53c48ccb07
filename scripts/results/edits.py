#!/usr/bin/env python3
"""Print, by task template, how far the tools agent's edits get.

Usage: scripts/results/edits.py SUITE ROLLOUTS.csv STEPS.csv [ROLLOUTS.csv STEPS.csv]...

SUITE is a built-in suite's tasks.jsonl (each task names its template and
carries its gold patch); each ROLLOUTS.csv / STEPS.csv pair is one run's
rollouts and steps tables (`legorl export --table rollouts|steps --format
csv`). For each (run, policy version) and template, of the completed
rollouts, it counts those that

  viewed  called view_file on the file the gold patch changes,
  other   called str_replace, but never on that file,
  o+v     of those, the ones that had viewed that file,
  file    called str_replace on that file,
  applied had such a call succeed (its old_str is in the file once),
  fix     wrote, in some str_replace's new_str, every line the gold patch adds,
  passed  passed the hidden tests.

A template that is never solved can fail at any of these steps: this says which
(no edit, the wrong file, an old_str not in the file, or a new_str with other
numbers or names than the task's).
"""
import collections
import csv
import json
import re
import sys

if len(sys.argv) < 4 or len(sys.argv) % 2:
    sys.exit("usage: edits.py SUITE ROLLOUTS.csv STEPS.csv [ROLLOUTS.csv STEPS.csv]...")
suite = {}
try:
    lines = open(sys.argv[1]).read().splitlines()
except OSError as e:
    sys.exit(f"edits.py: {sys.argv[1]}: {e.strerror}")
for line in lines:
    t = json.loads(line)
    m = re.search(r"^diff --git a/(\S+) b/", t["patch"], re.M)
    added = [l[1:].strip() for l in t["patch"].splitlines()
             if l.startswith("+") and not l.startswith("+++") and l[1:].strip()]
    suite[t["instance_id"]] = (t.get("template") or t.get("family", "") + "/?", m.group(1) if m else "", added)



def table(path):
    """The rows of a CSV table, or a one-line exit naming the file."""
    try:
        with open(path, newline="") as f:
            return list(csv.DictReader(f))
    except OSError as e:
        sys.exit(f"edits.py: {path}: {e.strerror}")


def arguments(s):
    """A step's tool arguments as a dict; {} when they do not parse as a JSON object."""
    try:
        a = json.loads(s["arguments"])
    except ValueError:
        return {}
    return a if isinstance(a, dict) else {}


STAGES = ("viewed", "other", "o+v", "file", "applied", "fix", "passed")
cells = collections.defaultdict(lambda: collections.Counter())  # (template, column) -> stage -> count
columns = []
for rpath, spath in zip(sys.argv[2::2], sys.argv[3::2]):
    steps = collections.defaultdict(list)
    views = collections.defaultdict(set)
    for s in table(spath):
        if "tool_name" not in s:
            sys.exit(f"edits.py: {spath}: not a steps table (no tool_name column)")
        if s["tool_name"] == "view_file":
            views[s["rollout_id"]].add(arguments(s).get("path"))
        elif s["tool_name"] == "str_replace":
            # arguments that do not parse name no file: the call failed
            steps[s["rollout_id"]].append((arguments(s), s["exit_code"] == "0"))
    for r in table(rpath):
        if "reward" not in r:
            sys.exit(f"edits.py: {rpath}: not a rollouts table (no reward column)")
        if r["status"] != "completed":
            continue  # masked: an environment failure, not scored
        if r["task_id"] not in suite:
            sys.exit(f"edits.py: {rpath}: task {r['task_id']} is not in {sys.argv[1]}")
        template, path, added = suite[r["task_id"]]
        col = f"{r['run_id']} v{r['policy_version']}"
        if col not in columns:
            columns.append(col)
        c = cells[(template, col)]
        c["rollouts"] += 1
        calls = steps[r["rollout_id"]]
        on_file = [ok for a, ok in calls if a.get("path") == path]
        viewed = path in views[r["rollout_id"]]
        c["viewed"] += viewed
        c["other"] += bool(calls) and not on_file
        c["o+v"] += bool(calls) and not on_file and viewed
        c["file"] += bool(on_file)
        c["applied"] += any(on_file)
        c["fix"] += any(all(l in str(a.get("new_str", "")) for l in added) for a, _ in calls)
        c["passed"] += float(r["reward"]) > 0

templates = sorted({t for t, _ in cells})
for col in columns:
    print(f"\n{col}\n")
    print("| template | rollouts | " + " | ".join(STAGES) + " |")
    print("| --- | --- | " + " | ".join("---" for _ in STAGES) + " |")
    for t in templates:
        c = cells.get((t, col))
        if not c:
            continue
        n = c["rollouts"]
        print(f"| {t} | {n} | " + " | ".join(f"{c[s]} ({c[s] / n:.2f})" for s in STAGES) + " |")
