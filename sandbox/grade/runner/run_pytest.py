"""legorl grader: runs pytest on the hidden tests and writes the results.

Started as: python3 -I -B run_pytest.py RESULTS_DIR PYTEST_ARGS...
It is mounted read-only; the workspace cannot change it. The plugin below
records each test's outcome to RESULTS_DIR/plugin.json (cross-checked
against pytest's own JUnit XML) and, once pytest has written its reports,
ends the process with pytest's exit status: atexit handlers and threads
that code under test left behind never get to run after the reports.
"""
import json
import os
import sys

results_dir = sys.argv[1]
args = sys.argv[2:]

import pytest  # noqa: E402  (the system's pytest; the workspace is not on sys.path yet)


class LegorlGrade:
    def __init__(self):
        self.tests = {}
        self.errors = []
        self.status = None

    def pytest_collectreport(self, report):
        if report.failed:
            self.errors.append(report.nodeid or "<collection>")

    def pytest_runtest_logreport(self, report):
        t = self.tests.setdefault(report.nodeid, {"call": False, "failed": False, "skipped": False})
        if report.when == "call":
            t["call"] = True
        if report.failed:
            t["failed"] = True
        if report.skipped:
            t["skipped"] = True

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session, exitstatus):
        self.status = int(exitstatus)
        out = {}
        for nodeid, t in self.tests.items():
            if t["failed"]:
                out[nodeid] = "failed"
            elif t["skipped"]:
                out[nodeid] = "skipped"
            elif t["call"]:
                out[nodeid] = "passed"
            else:
                out[nodeid] = "error"
        with open(os.path.join(results_dir, "plugin.json"), "w") as f:
            json.dump({"tests": out, "collect_errors": self.errors, "exitstatus": self.status}, f)

    @pytest.hookimpl(trylast=True)
    def pytest_unconfigure(self, config):
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(self.status if self.status is not None else 3)


status = pytest.main(args, plugins=[LegorlGrade()])
sys.stdout.flush()
os._exit(int(status) if int(status) != 0 else 3)
