"""legorl grader: the fast runner, for hidden tests of the plain shape.

Started as: python3 -I -B run_fast.py RESULTS_DIR WORKSPACE NODEID...
It is mounted read-only, like run_pytest.py, and writes the same two
reports (RESULTS_DIR/plugin.json and RESULTS_DIR/junit.xml) with the same
exit status pytest would have (0: every test passed, 1: some failed), but
without importing pytest (about 0.3 s of CPU per grade).

It only answers where it can give pytest's answer, test by test: every
required test is a function `def test_x():` of a hidden test file (trusted:
the grader wrote it) whose body is nothing but `assert MOD.F(LITERALS) ==
LITERAL` lines, and the workspace holds nothing that would make pytest
import differently (the grader checked on the host: no conftest.py,
__init__.py, .pth or symlink; here: no workspace module shadows one the
interpreter can find). It then does what pytest does for such tests: the
same sys.path (pythonpath first, then each test file's folder, prepend
import mode), the test modules imported once in the order pytest collects
them, stdin and output captured, warnings caught per phase,
PYTEST_CURRENT_TEST set, the tests run in the order given, and each
assertion evaluated the way pytest's rewritten assert does (operand, then
literal, then ==, then truth). A test passes iff that raises nothing and
is true.

Everything else declines (exit 86, no reports): a hidden test file of
another shape, a module that does not import, an exception that is not a
plain built-in one, or a failure whose values are not plain built-in data
(pytest would format them for its report, running code of the task). The
grader then grades the same diff again with pytest, in a fresh sandbox.
Declining is always safe; a decline before any task code ran costs only
this interpreter's start.
"""
import ast
import io
import json
import os
import sys
import types
import warnings
from importlib import import_module
from importlib.util import find_spec
from tempfile import TemporaryFile

DECLINE = 86


def decline(why):
    try:
        os.write(saved_out if saved_out is not None else 1, ("legorl fast runner declined: %s\n" % why).encode())
    finally:
        os._exit(DECLINE)


saved_out = None
results_dir, workspace = sys.argv[1], sys.argv[2]
nodeids = sys.argv[3:]
if not nodeids or len(set(nodeids)) != len(nodeids):
    decline("no or duplicate test ids")

# How much deeper than this runner pytest imports the test modules and
# calls the tests, in frames, per (Python, pytest) version, measured with
# a module that recurses until RecursionError (TestFastRunnerSameGrades
# checks it). Other versions decline.
PADS = {
    ((3, 11), "7.2.1"): (34, 32),
}


def pytest_version():
    spec = find_spec("_pytest")
    if spec is None or not spec.origin:
        return None
    try:
        with open(os.path.join(os.path.dirname(spec.origin), "_version.py")) as f:
            for line in f:
                if line.startswith("__version__ = version = "):
                    return line.split("=")[-1].strip().strip("'\"")
    except OSError:
        return None
    return None


pads = PADS.get((tuple(sys.version_info[:2]), pytest_version()))
if pads is None:
    decline("no measured stack depths for Python %s, pytest %s" % (sys.version.split()[0], pytest_version()))
PAD_COLLECT, PAD_CALL = pads

PLAIN = (int, bool, str, float, type(None))


def plain(v, depth=0):
    """v is built-in data all the way down: formatting it runs no task code."""
    t = type(v)
    if t in PLAIN:
        return True
    if depth > 50:
        return False
    if t is list or t is tuple:
        return all(plain(x, depth + 1) for x in v)
    if t is dict:
        return all(plain(k, depth + 1) and plain(x, depth + 1) for k, x in v.items())
    return False


def literal(node):
    try:
        v = ast.literal_eval(node)
    except Exception:
        return False
    return plain(v)


# The hidden test files, parsed before any code of the task runs.
files = {}  # path relative to the workspace -> {test name: [(left code, right code)]}
order = []  # test files in the order pytest collects them
tests = []  # (nodeid, file, name)
for nid in nodeids:
    parts = nid.split("::")
    if len(parts) != 2 or not parts[0].endswith(".py") or not parts[1].isidentifier() or not parts[1].startswith("test"):
        decline("test id of another shape: " + nid)
    rel, name = parts
    if rel.startswith("/") or ".." in rel.split("/") or "" in rel.split("/"):
        decline("test path " + rel)
    if rel not in files:
        full = os.path.join(workspace, rel)
        try:
            with open(full, "rb") as f:
                src = f.read()
            tree = ast.parse(src, full)
        except Exception as e:
            decline("test file %s: %s" % (rel, e))
        mods, funcs = set(), {}
        for st in tree.body:
            if isinstance(st, ast.Import):
                for a in st.names:
                    if a.asname is not None or "." in a.name:
                        decline("import of another shape in " + rel)
                    mods.add(a.name)
                continue
            if not (isinstance(st, ast.FunctionDef) and st.name.startswith("test") and not st.decorator_list
                    and st.returns is None and not st.type_comment and st.name not in funcs):
                decline("statement of another shape in " + rel)
            a = st.args
            if a.posonlyargs or a.args or a.vararg or a.kwonlyargs or a.kwarg or a.defaults or a.kw_defaults:
                decline("test with arguments in " + rel)
            checks = []
            for s in st.body:
                if not (isinstance(s, ast.Assert) and s.msg is None and isinstance(s.test, ast.Compare)
                        and len(s.test.ops) == 1 and isinstance(s.test.ops[0], ast.Eq)):
                    decline("test body of another shape in " + rel)
                left, right = s.test.left, s.test.comparators[0]
                if not (isinstance(left, ast.Call) and isinstance(left.func, ast.Attribute)
                        and isinstance(left.func.value, ast.Name) and left.func.value.id in mods
                        and not left.keywords and all(literal(x) for x in left.args) and literal(right)):
                    decline("assertion of another shape in " + rel)
                checks.append((
                    left.func.value.id, left.func.attr,
                    compile(ast.Expression(left), full, "eval"),
                    compile(ast.Expression(right), full, "eval"),
                ))
            funcs[st.name] = checks
        files[rel] = (os.path.splitext(os.path.basename(rel))[0], funcs)
        order.append(rel)
    if name not in files[rel][1]:
        decline("no test %s in %s" % (name, rel))
    tests.append((nid, rel, name))

# The folders pytest puts on sys.path: the pythonpath setting (the
# workspace), then each test file's folder. No module there may shadow
# one the interpreter finds without them (pytest has imported many).
dirs = [workspace] + [os.path.dirname(os.path.join(workspace, rel)) for rel in order]
for d in dict.fromkeys(dirs):
    try:
        names = os.listdir(d)
    except OSError as e:
        decline("listing %s: %s" % (d, e))
    for n in names:
        stem = n.split(".", 1)[0]
        p = os.path.join(d, n)
        if n.endswith((".py", ".pyc", ".pyw")) or ".so" in n or os.path.isdir(p):
            if not stem.isidentifier():
                continue
            try:
                spec = find_spec(stem)
            except Exception:
                spec = None
                decline("looking up " + stem)
            if spec is not None or stem in sys.modules:
                decline("workspace module %s shadows an installed one" % stem)


class DontReadFromInput:
    """pytest's stdin while output is captured."""

    encoding = None

    def read(self, *args):
        raise OSError("pytest: reading from stdin while output is captured!  Consider using `-s`.")

    readline = read
    readlines = read
    __next__ = read

    def __iter__(self):
        return self

    def fileno(self):
        raise io.UnsupportedOperation("redirected stdin is pseudofile, has no fileno()")

    def flush(self):
        raise io.UnsupportedOperation("redirected stdin is pseudofile, has no flush()")

    def isatty(self):
        return False

    def close(self):
        pass

    def readable(self):
        return False

    def seek(self, offset):
        raise io.UnsupportedOperation("redirected stdin is pseudofile, has no seek(int)")

    def seekable(self):
        return False

    def tell(self):
        raise io.UnsupportedOperation("redirected stdin is pseudofile, has no tell()")

    def truncate(self, size):
        raise io.UnsupportedOperation("cannont truncate stdin")

    def writable(self):
        return False

    def write(self, data):
        raise io.UnsupportedOperation("cannot write to stdin")

    def writelines(self, lines):
        raise io.UnsupportedOperation("Cannot write to stdin")

    @property
    def buffer(self):
        return self


# Capture as pytest's default (--capture=fd) does: fd 0 from /dev/null,
# fds 1 and 2 into temporary files, sys.std* replaced.
sys.stdout.flush()
sys.stderr.flush()
saved_out = os.dup(1)
null = os.open(os.devnull, os.O_RDONLY)
os.dup2(null, 0)
os.close(null)
for fd, attr in ((1, "stdout"), (2, "stderr")):
    tmp = TemporaryFile(buffering=0)
    os.dup2(tmp.fileno(), fd)
    setattr(sys, attr, io.TextIOWrapper(tmp, encoding="utf-8", errors="replace", newline="", write_through=True))
sys.stdin = DontReadFromInput()


def caught():
    """pytest's catch_warnings_for_item, without filters of its own."""
    cm = warnings.catch_warnings(record=True)
    cm.__enter__()
    if not sys.warnoptions:
        warnings.filterwarnings("always", category=DeprecationWarning)
        warnings.filterwarnings("always", category=PendingDeprecationWarning)
    return cm


def plain_exception(e):
    """e is a built-in Exception holding built-in data, with no chain:
    pytest's report of it runs no task code."""
    t = type(e)
    if t.__module__ != "builtins" or not issubclass(t, Exception) or e.__cause__ is not None or e.__context__ is not None:
        return False
    if not plain(e.args) or not plain(getattr(e, "__notes__", None)):
        return False
    extra = set(vars(e)) if hasattr(e, "__dict__") else set()
    if extra - {"__notes__"}:
        return False
    # pytest shows the arguments of the frame that raised.
    tb = e.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    if tb is not None:
        code, loc = tb.tb_frame.f_code, tb.tb_frame.f_locals
        n = code.co_argcount + code.co_kwonlyargcount
        n += bool(code.co_flags & 0x04) + bool(code.co_flags & 0x08)
        for a in code.co_varnames[:n]:
            if a in loc and not plain(loc[a]):
                return False
    return True


def deep(n, fn):
    """fn() called n frames deeper: pytest runs collection and tests that
    much further down the stack, and code that recurses must reach the
    recursion limit at the same depth as under pytest."""
    if n <= 0:
        return fn()
    return deep(n - 1, fn)


def collect():
    for rel in order:
        full = os.path.join(workspace, rel)
        root = os.path.dirname(full)
        if sys.path[0] != root:
            sys.path.insert(0, root)
        modname = files[rel][0]
        import_module(modname)
        mod = sys.modules[modname]
        f = getattr(mod, "__file__", None)
        if type(mod) is not types.ModuleType or not f or not os.path.samefile(f, full):
            decline("test module %s is not %s" % (modname, rel))
        modules[rel] = mod


# Collection: pytest's prepend import mode, pythonpath first.
sys.path.insert(0, workspace)
modules = {}
cm = caught()
try:
    deep(PAD_COLLECT, collect)
except BaseException as e:  # pytest reports a collection error; let it.
    decline("collecting: %s" % type(e).__name__)
finally:
    cm.__exit__(None, None, None)

status = {}
failures = {}
for nid, rel, name in tests:
    g = modules[rel].__dict__
    os.environ["PYTEST_CURRENT_TEST"] = nid + " (call)"
    cm = caught()
    ok, why = True, ""

    def call():
        for modname, fname, left, right in files[rel][1][name]:
            # Called as Python functions, not through eval(): a call from
            # Python to Python costs the same depth however warm the call
            # site is, as the call of each test function in pytest does.
            lv = types.FunctionType(left, g)()
            rv = types.FunctionType(right, g)()
            res = lv == rv
            if not res:
                m = g.get(modname)
                if not (plain(lv) and type(res) is bool and type(m) is types.ModuleType and "__name__" in vars(m)
                        and type(getattr(m, fname, None)) in (types.FunctionType, types.BuiltinFunctionType)):
                    decline("%s: a failure pytest would format with task code" % nid)
                return False, "AssertionError: assert %r == %r" % (lv, rv)
        return True, ""

    try:
        ok, why = deep(PAD_CALL, call)
    except BaseException as e:
        if not plain_exception(e):
            decline("%s raised %s" % (nid, type(e).__name__))
        ok, why = False, "%s: %s" % (type(e).__name__, e)
        e = None
    finally:
        cm.__exit__(None, None, None)
        os.environ.pop("PYTEST_CURRENT_TEST", None)
    status[nid] = "passed" if ok else "failed"
    if not ok:
        failures[nid] = why


def esc(s):
    s = "".join(c if c in "\t\n\r" or (" " <= c <= "\ud7ff") or ("\ue000" <= c <= "\ufffd") else "?" for c in s)
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")


exitstatus = 1 if failures else 0
cases = []
for nid, rel, name in tests:
    cls = rel[:-3].replace("/", ".")
    body = ""
    if nid in failures:
        body = '<failure message="%s"/>' % esc(failures[nid][:2000])
    cases.append('<testcase classname="%s" name="%s">%s</testcase>' % (esc(cls), esc(name), body))
junit = ('<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest" errors="0" failures="%d" '
         'skipped="0" tests="%d">%s</testsuite></testsuites>' % (len(failures), len(tests), "".join(cases)))
with open(os.path.join(results_dir, "junit.xml"), "w", encoding="utf-8") as f:
    f.write(junit)
with open(os.path.join(results_dir, "plugin.json"), "w") as f:
    json.dump({"tests": status, "collect_errors": [], "exitstatus": exitstatus}, f)
summary = "".join("FAILED %s - %s\n" % (nid, failures[nid][:300]) for nid, _, _ in tests if nid in failures)
summary += "%d failed, %d passed (legorl fast runner)\n" % (len(failures), len(tests) - len(failures))
os.write(saved_out, summary.encode("utf-8", "replace"))
os._exit(exitstatus)
