"""legorl_behaviour: what an agent does, per rollout, from a run's tables.

The measures the paper reports per harness over training, computed from the
`rollouts` table (counts per episode) and, where the run has one, the
`steps` table (one row per tool call: tool name, arguments):

    turns per episode       num_turns (the harness's count, else the proxy's)
    tool calls per turn     num_tool_calls / num_turns
    text-only replies       model calls that made no tool call, as a share
                            of the calls: (num_llm_calls - num_tool_calls)
                            floored at 0, over num_llm_calls (a call with
                            several tool calls counts them all, so this is
                            a lower bound)
    edit-then-verify rate   of the rollouts that edited a file, the share
                            that afterwards read a file or ran the tests

`classify` names what a step does (edit, read, test, shell, submit, none)
from its tool name and arguments, for the tools of every harness here: the
built-in agents' (bash, view_file, str_replace, submit), pi's (read, bash,
edit, write), Codex's (exec_command; an `apply_patch` command is an edit),
OpenCode's (read, edit, bash, grep, glob) and Claude Code's (Read, Edit,
Bash).
"""

import json
import re

import numpy as np
import pandas as pd

EDIT_TOOLS = {"str_replace", "str_replace_editor", "str_replace_based_edit_tool", "edit", "multiedit", "write",
              "write_file", "create", "create_file", "apply_patch", "patch", "insert", "file_change", "notebook_edit"}
READ_TOOLS = {"view", "view_file", "read", "read_file", "open", "cat", "grep", "grep_search", "glob", "search",
              "find", "ls", "list_files"}
SHELL_TOOLS = {"bash", "shell", "run", "terminal", "execute", "exec_command", "run_command", "local_shell",
               "run_shell_command"}
SUBMIT_TOOLS = {"submit", "finish", "done", "task_complete"}
TEST_RE = re.compile(r"\b(pytest|py\.test|go test|unittest|tox|nox|npm (run )?test|yarn test|make (test|check)|cargo test)\b")
WRITE_RE = re.compile(r"\bsed -i\b|\bperl -pi\b|(^|[^2&])>>?\s*[\w./-]+|\btee\b|\bpatch\b|\bgit apply\b|\bapply_patch\b")
READ_RE = re.compile(r"^\s*(cat|head|tail|less|more|nl|grep|rg|ag|find|ls|tree|sed -n|awk)\b")
ACTIONS = ("edit", "read", "test", "shell", "submit", "other", "none")


def command_of(arguments):
    """The command string of a shell tool call's JSON arguments."""
    try:
        a = json.loads(arguments) if arguments else {}
    except ValueError:
        return arguments or ""
    if isinstance(a, dict):
        c = a.get("command") or a.get("cmd") or a.get("script") or ""
        return " ".join(c) if isinstance(c, list) else str(c)
    return str(a)


def classify(tool, arguments):
    """What a step does: one of ACTIONS."""
    t = (tool or "").lower()
    if not t:
        return "none"
    if t in EDIT_TOOLS:
        # str_replace_editor-style tools carry their own sub-command.
        try:
            sub = json.loads(arguments or "{}").get("command", "")
        except (ValueError, AttributeError):
            sub = ""
        return "read" if sub == "view" else "edit"
    if t in READ_TOOLS:
        return "read"
    if t in SUBMIT_TOOLS:
        return "submit"
    if t in SHELL_TOOLS:
        cmd = command_of(arguments)
        if TEST_RE.search(cmd):
            return "test"
        if WRITE_RE.search(cmd):
            return "edit"
        if READ_RE.search(cmd):
            return "read"
        return "shell"
    return "other"


def verifies(actions):
    """1.0 when a read or test follows the first edit of the actions in
    order, 0.0 when none does, NaN when nothing was edited."""
    actions = list(actions)
    if "edit" not in actions:
        return np.nan
    first = actions.index("edit")
    return float(any(a in ("read", "test") for a in actions[first + 1:]))


def per_rollout(rollouts, steps=None):
    """One row per completed rollout: run, harness, iteration, and the
    behaviour measures (edit_then_verify NaN without steps or edits)."""
    done = rollouts[rollouts.status == "completed"].copy()
    calls = done.num_llm_calls.clip(lower=1)
    turns = done.num_turns.where(done.num_turns > 0, done.num_llm_calls).clip(lower=1)
    done["turns"] = turns
    done["tool_calls_per_turn"] = done.num_tool_calls / turns
    done["text_only_share"] = (done.num_llm_calls - done.num_tool_calls).clip(lower=0) / calls
    done["edit_then_verify"] = np.nan
    if steps is not None and len(steps):
        s = steps[["rollout_id", "turn", "tool_name", "arguments"]].copy()
        s["action"] = [classify(t, a) for t, a in zip(s.tool_name, s.arguments)]
        v = s.sort_values(["rollout_id", "turn"], kind="stable").groupby("rollout_id").action.agg(verifies)
        done["edit_then_verify"] = done.rollout_id.map(v)
    keep = ["run", "harness", "iteration", "rollout_id", "turns", "tool_calls_per_turn", "text_only_share",
            "edit_then_verify", "reward"]
    return done[[c for c in keep if c in done.columns]]


def per_iteration(rows):
    """The measures' means per run, harness and iteration, with the number
    of rollouts and of those that edited."""
    return rows.groupby(["run", "harness", "iteration"]).agg(
        rollouts=("rollout_id", "size"), pass_rate=("reward", "mean"), turns_per_episode=("turns", "mean"),
        tool_calls_per_turn=("tool_calls_per_turn", "mean"), text_only_share=("text_only_share", "mean"),
        edited=("edit_then_verify", "count"), edit_then_verify_rate=("edit_then_verify", "mean")).reset_index()


def first_last(table):
    """Per run and harness: each measure at the first and the last
    iteration, the shape of a before/after table."""
    measures = ["turns_per_episode", "tool_calls_per_turn", "text_only_share", "edit_then_verify_rate", "pass_rate"]
    out = []
    for (run, h), g in table.sort_values("iteration").groupby(["run", "harness"]):
        row = {"run": run, "harness": h, "iterations": int(g.iteration.nunique())}
        for m in measures:
            row[m + "_first"], row[m + "_last"] = g[m].iloc[0], g[m].iloc[-1]
        out.append(row)
    return pd.DataFrame(out)
