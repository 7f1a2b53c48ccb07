"""Tests of legorl_behaviour on small tables made here (run by cmd/legorl's
TestNotebooks, or: cd notebooks && python3 -m unittest test_legorl_behaviour)."""

import json
import math
import unittest

import pandas as pd

import legorl_behaviour as lb


def args(**kw):
    return json.dumps(kw)


class ClassifyTest(unittest.TestCase):
    def test_each_harness_tools(self):
        cases = [
            ("str_replace", args(path="a.py"), "edit"),
            ("view_file", args(path="a.py"), "read"),
            ("submit", "{}", "submit"),
            ("bash", args(command="python -m pytest -q"), "test"),
            ("bash", args(command="sed -i 's/a/b/' a.py"), "edit"),
            ("read", args(path="a.py"), "read"),                        # pi, OpenCode
            ("edit", args(filePath="a.py"), "edit"),                    # OpenCode
            ("exec_command", args(cmd="cat a.py"), "read"),             # Codex
            ("exec_command", args(cmd="apply_patch <<'EOF'\n*** Begin Patch\n"), "edit"),
            ("file_change", "", "edit"),
            ("exec_command", args(cmd="echo hi"), "shell"),
            ("", "", "none"),
            ("todowrite", "{}", "other"),
        ]
        for tool, a, want in cases:
            with self.subTest(tool=tool, args=a):
                self.assertEqual(lb.classify(tool, a), want)

    def test_verifies(self):
        self.assertEqual(lb.verifies(["read", "edit", "test"]), 1.0)
        self.assertEqual(lb.verifies(["read", "edit"]), 0.0)
        self.assertTrue(math.isnan(lb.verifies(["read", "shell"])))


class MeasuresTest(unittest.TestCase):
    def setUp(self):
        self.rollouts = pd.DataFrame([
            # rollout, iteration, status, turns, llm calls, tool calls, reward
            ("r1", 0, "completed", 3, 3, 2, 1.0),
            ("r2", 0, "completed", 0, 4, 1, 0.0),   # the harness did not count turns: the proxy's calls
            ("r3", 1, "completed", 2, 2, 4, 1.0),   # several calls a turn: no text-only replies
            ("r4", 1, "masked", 1, 1, 0, 0.0),      # masked: left out
        ], columns=["rollout_id", "iteration", "status", "num_turns", "num_llm_calls", "num_tool_calls", "reward"])
        self.rollouts["run"], self.rollouts["harness"] = "x", "codex"
        self.steps = pd.DataFrame([
            ("r1", 0, "exec_command", args(cmd="cat a.py")),
            ("r1", 1, "exec_command", args(cmd="apply_patch <<'EOF'")),
            ("r2", 0, "exec_command", args(cmd="ls")),
            ("r3", 0, "exec_command", args(cmd="apply_patch <<'EOF'")),
            ("r3", 1, "exec_command", args(cmd="python -m pytest")),
        ], columns=["rollout_id", "turn", "tool_name", "arguments"])

    def test_per_rollout(self):
        r = lb.per_rollout(self.rollouts, self.steps).set_index("rollout_id")
        self.assertEqual(sorted(r.index), ["r1", "r2", "r3"])
        self.assertEqual(r.loc["r2", "turns"], 4)
        self.assertAlmostEqual(r.loc["r1", "tool_calls_per_turn"], 2 / 3)
        self.assertAlmostEqual(r.loc["r1", "text_only_share"], 1 / 3)
        self.assertAlmostEqual(r.loc["r2", "text_only_share"], 3 / 4)
        self.assertEqual(r.loc["r3", "text_only_share"], 0)
        self.assertEqual(r.loc["r1", "edit_then_verify"], 0.0)
        self.assertEqual(r.loc["r3", "edit_then_verify"], 1.0)
        self.assertTrue(math.isnan(r.loc["r2", "edit_then_verify"]))

    def test_without_steps(self):
        r = lb.per_rollout(self.rollouts)
        self.assertTrue(r.edit_then_verify.isna().all())

    def test_tables(self):
        t = lb.per_iteration(lb.per_rollout(self.rollouts, self.steps))
        self.assertEqual(list(t.iteration), [0, 1])
        self.assertEqual(list(t.rollouts), [2, 1])
        self.assertEqual(list(t.edited), [1, 1])
        s = lb.first_last(t)
        self.assertEqual(len(s), 1)
        self.assertEqual(s.loc[0, "iterations"], 2)
        self.assertAlmostEqual(s.loc[0, "turns_per_episode_first"], 3.5)
        self.assertAlmostEqual(s.loc[0, "edit_then_verify_rate_last"], 1.0)


if __name__ == "__main__":
    unittest.main()
