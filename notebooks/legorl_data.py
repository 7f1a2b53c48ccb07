"""legorl_data: a legorl run's tables as pandas DataFrames, for the notebooks.

A run's data is what its manifests name, as legorl itself reads it
(docs/ARCHITECTURE.md, "The write-once commit protocol"). `load_table` reads
it with pyarrow when pyarrow is installed and the store is a folder
(file://), else by running the project's `legorl export --format jsonl`,
which checks every file's sha256 against its manifest (Debian 12 ships no
pyarrow). The binary is $LEGORL_BIN, else bin/legorl of this checkout, else
`legorl` on PATH.

Settings come from the environment, so a headless run can point the
notebooks at any store:

    LEGORL_STORE        store URI (file:///abs/path or s3://bucket/prefix);
                        defaults to file://<checkout>/legorl-data, where
                        `make demo` writes
    LEGORL_RUN          run id (required)
    LEGORL_CHECKPOINTS  checkpoint folders written by `legorl train`,
                        separated by ':' (optional)
    LEGORL_BIN          the legorl binary
    LEGORL_DATA_BACKEND auto (default), pyarrow or export
    LEGORL_S3_ENDPOINT, AWS_*   passed on to legorl for s3:// stores

Every failure raises a LegorlDataError (NoSuchRun, MissingTable,
CorruptData) whose message is one line.
"""

import hashlib
import json
import os
import re
import shutil
import struct
import subprocess
import tempfile

# Mirrors of the Go contract (schemas/); the project's tests check that
# they agree with it.
SCHEMA_VERSION = 2
TABLES = ("rollouts", "segments", "steps", "train_steps", "replay")
# RUN_TABLES are the tables a run writes; replay is written by an audit (legorl audit --replay).
RUN_TABLES = TABLES[:4]
TERMINATIONS = ("agent_completed", "max_turns", "timeout", "overlong", "context_error",
                "env_setup_failed", "sandbox_crash", "harness_error")
# Only these are scored (status "completed"); every other termination is an
# infrastructure failure and must be "masked".
SCORED_TERMINATIONS = ("agent_completed", "max_turns")
# Float columns: JSON writes 1.0 as 1, so the export path casts these back.
FLOAT_COLUMNS = {
    "rollouts": ("reward", "setup_seconds", "agent_seconds", "llm_seconds", "tools_seconds", "grade_seconds"),
    "segments": ("temperature", "top_p"),
    "steps": ("seconds",),
    "train_steps": ("loss", "grad_norm", "lr", "clip_fraction", "entropy", "kl", "logprob_pearson",
                    "logprob_spearman", "logprob_mean_abs_diff", "logprob_max_abs_diff", "is_ratio_mean",
                    "is_ratio_min", "is_ratio_max", "ess", "tokens_per_second"),
    "replay": ("reward", "replayed_reward", "seconds"),
}
# The trainer's train-inference gate default (trainer.Config.MinPearson).
MIN_PEARSON = 0.99
RECOMPUTED_FILE = "recomputed_logprobs.safetensors"
LINEAGE_FILE = "lineage.json"

_CHECKOUT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
_MANIFEST_RE = re.compile(r"^runs/([^/]+)/manifests/([^/]+)/iter-(\d{6})/v(\d{6})\.json$")


class LegorlDataError(Exception):
    """A run's data could not be read; the message is one line."""

    def __init__(self, message):
        super().__init__(" ".join(str(message).split()))


class NoSuchRun(LegorlDataError):
    """The store has no committed data of the run."""


class MissingTable(LegorlDataError):
    """The run exists but has no committed files of the table."""


class CorruptData(LegorlDataError):
    """A file or manifest does not match what was committed, or cannot be decoded."""


# ---------------------------------------------------------------- settings

def store():
    """The store URI: $LEGORL_STORE, else this checkout's legorl-data folder."""
    return os.environ.get("LEGORL_STORE") or "file://" + os.path.join(_CHECKOUT, "legorl-data")


def run_id():
    """The run id: $LEGORL_RUN. Raises LegorlDataError, naming the runs of a folder store, when unset."""
    run = os.environ.get("LEGORL_RUN", "")
    if not run:
        hint = ""
        runs = list_runs(store()) if file_root(store()) else []
        if runs:
            hint = "; runs in the store: " + ", ".join(runs)
        raise LegorlDataError(f"legorl_data: set LEGORL_RUN to the run to analyse (store {store()}{hint})")
    _check_name("run id", run)
    return run


def checkpoints():
    """The checkpoint folders of $LEGORL_CHECKPOINTS (':'-separated), in order; [] when unset."""
    out = [p for p in os.environ.get("LEGORL_CHECKPOINTS", "").split(os.pathsep) if p]
    for p in out:
        if not os.path.isdir(p):
            raise LegorlDataError(f"legorl_data: checkpoint folder {p} (from LEGORL_CHECKPOINTS) does not exist")
    return out


def legorl_bin():
    """The legorl binary: $LEGORL_BIN, else bin/legorl of this checkout, else legorl on PATH."""
    b = os.environ.get("LEGORL_BIN")
    if b:
        if not (os.path.isfile(b) and os.access(b, os.X_OK)):
            raise LegorlDataError(f"legorl_data: LEGORL_BIN={b} is not an executable file")
        return b
    b = os.path.join(_CHECKOUT, "bin", "legorl")
    if os.path.isfile(b) and os.access(b, os.X_OK):
        return b
    b = shutil.which("legorl")
    if b:
        return b
    raise LegorlDataError("legorl_data: no legorl binary to read the data with: run `make build` (bin/legorl), "
                          "set LEGORL_BIN, or install pyarrow")


def backend(store_uri):
    """How load_table reads store_uri: "pyarrow" or "export"."""
    want = os.environ.get("LEGORL_DATA_BACKEND", "auto")
    if want not in ("auto", "pyarrow", "export"):
        raise LegorlDataError(f"legorl_data: LEGORL_DATA_BACKEND={want}: want auto, pyarrow or export")
    if want == "export":
        return "export"
    try:
        import pyarrow.parquet  # noqa: F401
        have = True
    except ImportError:
        have = False
    if want == "pyarrow":
        if not have or not file_root(store_uri):
            raise LegorlDataError("legorl_data: LEGORL_DATA_BACKEND=pyarrow needs pyarrow and a file:// store")
        return "pyarrow"
    return "pyarrow" if have and file_root(store_uri) else "export"


# ---------------------------------------------------------------- tables

def load_table(store_uri, run, table):
    """Every committed row of a run's table, as a pandas DataFrame.

    List columns hold Python lists. Raises NoSuchRun, MissingTable or
    CorruptData (one-line messages), or LegorlDataError for anything else.
    """
    if table not in TABLES:
        raise LegorlDataError(f"legorl_data: unknown table {table!r}: want one of {', '.join(TABLES)}")
    _check_name("run id", run)
    root = file_root(store_uri)
    if root and not os.path.isdir(root):
        # Checked here: legorl would create the folder.
        raise NoSuchRun(f"legorl_data: no such run {run!r}: the store folder {root} does not exist")
    if backend(store_uri) == "pyarrow":
        return _load_pyarrow(store_uri, run, table)
    return _load_export(store_uri, run, table)


def _frame(rows, table):
    import pandas as pd
    df = pd.DataFrame.from_records(rows)
    for c in FLOAT_COLUMNS[table]:
        if c in df.columns:
            df[c] = df[c].astype("float64")
    return df


def _load_export(store_uri, run, table):
    cmd = [legorl_bin(), "export", "--store", store_uri, "--run", run, "--table", table, "--format", "jsonl"]
    rows = []
    with tempfile.TemporaryFile() as errf:
        try:
            p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=errf)
        except OSError as e:
            raise LegorlDataError(f"legorl_data: cannot run {cmd[0]}: {e}") from None
        try:
            with p.stdout:
                for line in p.stdout:
                    if line.strip():
                        rows.append(json.loads(line))
        except BaseException as ex:  # a bad line, or an interrupt: stop legorl too
            p.kill()
            p.wait()
            if isinstance(ex, ValueError):
                raise LegorlDataError(f"legorl_data: {cmd[0]} export wrote a line that is not JSON: {ex}") from None
            raise
        code = p.wait()
        if code != 0:
            errf.seek(0)
            lines = [l for l in errf.read().decode("utf-8", "replace").splitlines() if l.strip()]
            raise _export_error(lines[-1] if lines else f"exit status {code}", store_uri, run, table)
    return _frame(rows, table)


def _export_error(line, store_uri, run, table):
    """Maps legorl export's one-line error to an exception."""
    if "has no committed" in line:
        return _missing(store_uri, run, table)
    # legorl's sentinels: storage.ErrChecksum, ErrCorrupt, ErrManifest, ErrNotFound (a committed file
    # that is gone) and schemas.ErrSchemaVersion.
    if any(s in line for s in ("checksum mismatch", "corrupt file", "bad manifest", "object not found",
                               "unsupported schema version")):
        return CorruptData(f"legorl_data: {table} of run {run!r} is corrupt: {line}")
    return LegorlDataError(f"legorl_data: reading {table} of run {run!r} failed: {line}")


def _missing(store_uri, run, table):
    """NoSuchRun when the run has no committed data at all, else MissingTable."""
    if _run_has_data(store_uri, run, table):
        return MissingTable(f"legorl_data: run {run!r} has no committed {table} table in {store_uri} "
                            "(not written yet, or not written by this pipeline)")
    hint = ""
    root = file_root(store_uri)
    if root:
        runs = list_runs(store_uri)
        hint = "; runs there: " + (", ".join(runs) if runs else "none")
    return NoSuchRun(f"legorl_data: no such run {run!r} in {store_uri}: nothing committed under runs/{run}/{hint}")


def _run_has_data(store_uri, run, missing):
    if file_root(store_uri):
        return bool(manifest_keys(store_uri, run))
    # Another store: ask legorl for the run's smaller tables.
    for t in ("train_steps", "rollouts", "steps"):
        if t == missing:
            continue
        p = subprocess.run([legorl_bin(), "export", "--store", store_uri, "--run", run, "--table", t],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if p.returncode == 0:
            return True
    return False


def _load_pyarrow(store_uri, run, table):
    import pyarrow as pa
    import pyarrow.parquet as pq
    entries = table_files(store_uri, run, table)
    parts = []
    for e in entries:
        path = verify_file(store_uri, e)
        try:
            t = pq.read_table(path)
        except Exception as ex:  # pyarrow raises several types for bad files
            raise CorruptData(f"legorl_data: {e['key']}: {ex}") from None
        meta = {k.decode(): v.decode() for k, v in (t.schema.metadata or {}).items()}
        check_footer(e, meta, run)
        if t.num_rows != e["rows"]:
            raise CorruptData(f"legorl_data: {e['key']}: {t.num_rows} rows, manifest says {e['rows']}")
        parts.append(t.replace_schema_metadata(None))
    df = pa.concat_tables(parts).to_pandas()
    for c, typ in zip(parts[0].schema.names, parts[0].schema.types):
        if pa.types.is_list(typ):
            df[c] = df[c].map(lambda v: v.tolist())
    return df


# ---------------------------------------------------------------- folder stores

def file_root(store_uri):
    """The folder of a file:// store (relative paths from the working directory); None for other stores."""
    if not store_uri.startswith("file://"):
        return None
    rest = store_uri[len("file://"):]
    if not rest:
        raise LegorlDataError(f"legorl_data: store URI {store_uri!r} has no path")
    return os.path.abspath(rest)


def _root(store_uri):
    root = file_root(store_uri)
    if root is None:
        raise LegorlDataError(f"legorl_data: {store_uri} is not a file:// store: reading manifests and files "
                              "directly needs a folder (copy the run down first)")
    return root


def object_path(store_uri, key):
    """The local path of an object key of a file:// store."""
    if key.startswith("/") or ".." in key.split("/"):
        raise CorruptData(f"legorl_data: bad object key {key!r}")
    return os.path.join(_root(store_uri), *key.split("/"))


def list_runs(store_uri):
    """The run ids with at least one committed manifest in a file:// store, sorted."""
    d = os.path.join(_root(store_uri), "runs")
    if not os.path.isdir(d):
        return []
    return sorted(r for r in os.listdir(d) if _NAME_RE.match(r) and manifest_keys(store_uri, r))


def manifest_keys(store_uri, run):
    """Every manifest version's key of a run in a file:// store, sorted."""
    base = os.path.join(_root(store_uri), "runs", run, "manifests")
    out = []
    for dirpath, _, files in os.walk(base):
        for f in files:
            key = os.path.relpath(os.path.join(dirpath, f), _root(store_uri)).replace(os.sep, "/")
            if _MANIFEST_RE.match(key):
                out.append(key)
    return sorted(out)


def read_manifest(store_uri, key):
    """One manifest version as a dict; CorruptData when it is not a valid manifest."""
    try:
        with open(object_path(store_uri, key), "rb") as f:
            m = json.loads(f.read())
        if not isinstance(m, dict) or not isinstance(m.get("files"), list):
            raise ValueError("not a manifest object")
        for e in m["files"]:
            if not (isinstance(e.get("key"), str) and isinstance(e.get("sha256"), str) and len(e["sha256"]) == 64
                    and isinstance(e.get("size"), int) and isinstance(e.get("rows"), int) and e.get("table") in TABLES):
                raise ValueError(f"bad entry {e!r}")
    except (OSError, ValueError) as ex:
        raise CorruptData(f"legorl_data: manifest {key}: {ex}") from None
    return m


def manifests(store_uri, run):
    """The newest version of every manifest of a run (file:// store), by iteration then stage.

    Each dict also has "key" (its object key) and "versions" (how many
    versions were committed). NoSuchRun when there is none.
    """
    newest = {}
    count = {}
    for key in manifest_keys(store_uri, run):
        prefix = key.rsplit("/", 1)[0]
        count[prefix] = count.get(prefix, 0) + 1
        if key > newest.get(prefix, ""):
            newest[prefix] = key
    if not newest:
        raise _missing(store_uri, run, None)
    out = []
    for prefix, key in newest.items():
        m = read_manifest(store_uri, key)
        m["key"], m["versions"] = key, count[prefix]
        out.append(m)
    out.sort(key=lambda m: (m.get("iteration", 0), m.get("stage", "")))
    return out


def table_files(store_uri, run, table):
    """The committed file entries of a table of a run (file:// store), in manifest order."""
    out = [e for m in manifests(store_uri, run) for e in m["files"] if e["table"] == table]
    if not out:
        raise _missing(store_uri, run, table)
    return out


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def verify_file(store_uri, entry):
    """Checks a committed file's size and sha256 against its manifest entry; returns its path."""
    path = object_path(store_uri, entry["key"])
    try:
        size = os.path.getsize(path)
    except OSError:
        raise CorruptData(f"legorl_data: {entry['key']} is named by a manifest but missing") from None
    if size != entry["size"]:
        raise CorruptData(f"legorl_data: {entry['key']}: {size} bytes, manifest says {entry['size']}")
    if sha256_file(path) != entry["sha256"]:
        raise CorruptData(f"legorl_data: {entry['key']}: sha256 does not match the manifest")
    return path


def check_footer(entry, meta, run):
    """Checks a file's footer key/value metadata against its manifest entry and run."""
    v = meta.get("legorl.schema_version", "")
    if not v.isdigit() or not 1 <= int(v) <= SCHEMA_VERSION:
        raise CorruptData(f"legorl_data: {entry['key']}: schema version {v!r}, this helper reads 1..{SCHEMA_VERSION}")
    if meta.get("legorl.table") != entry["table"]:
        raise CorruptData(f"legorl_data: {entry['key']}: footer table {meta.get('legorl.table')!r}, "
                          f"manifest says {entry['table']!r}")
    if meta.get("legorl.run_id") != run:
        raise CorruptData(f"legorl_data: {entry['key']}: footer run {meta.get('legorl.run_id')!r}, want {run!r}")


# ---------------------------------------------------------------- Parquet footers

class _Thrift:
    """A reader of Thrift's compact protocol, enough for Parquet's FileMetaData."""

    def __init__(self, buf):
        self.b, self.i = buf, 0

    def byte(self):
        v = self.b[self.i]
        self.i += 1
        return v

    def varint(self):
        out = shift = 0
        while True:
            b = self.byte()
            out |= (b & 0x7F) << shift
            if not b & 0x80:
                return out
            shift += 7
            if shift > 63:
                raise ValueError("varint too long")

    def zigzag(self):
        n = self.varint()
        return (n >> 1) ^ -(n & 1)

    def value(self, t, depth):
        if depth > 32:
            raise ValueError("nesting too deep")
        if t in (1, 2):
            return t == 1
        if t == 3:
            return struct.unpack("b", bytes([self.byte()]))[0]
        if t in (4, 5, 6):
            return self.zigzag()
        if t == 7:
            (v,) = struct.unpack_from("<d", self.b, self.i)
            self.i += 8
            return v
        if t == 8:
            n = self.varint()
            if self.i + n > len(self.b):
                raise ValueError("string past the end")
            s = bytes(self.b[self.i:self.i + n])
            self.i += n
            return s
        if t in (9, 10):
            h = self.byte()
            n, et = h >> 4, h & 0x0F
            if n == 15:
                n = self.varint()
            if n > len(self.b):
                raise ValueError("list longer than the footer")
            if et in (1, 2):
                return [self.byte() == 1 for _ in range(n)]
            return [self.value(et, depth + 1) for _ in range(n)]
        if t == 11:
            n = self.varint()
            if n == 0:
                return []
            kv = self.byte()
            return [(self.value(kv >> 4, depth + 1), self.value(kv & 0x0F, depth + 1)) for _ in range(n)]
        if t == 12:
            return self.struct(depth + 1)
        raise ValueError(f"unknown type {t}")

    def struct(self, depth=0):
        out, last = {}, 0
        while True:
            h = self.byte()
            if h == 0:
                return out
            t, delta = h & 0x0F, h >> 4
            fid = last + delta if delta else self.zigzag()
            last = fid
            out[fid] = self.value(t, depth)


def parquet_footer(path):
    """Reads a Parquet file's footer without pyarrow.

    Returns {"num_rows", "columns" (top-level names), "metadata" (key/value
    strings), "created_by"}; CorruptData when the file is not Parquet.
    """
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            if size < 12:
                raise ValueError(f"{size} bytes is too short for Parquet")
            f.seek(0)
            head = f.read(4)
            f.seek(size - 8)
            tail = f.read(8)
            n = int.from_bytes(tail[:4], "little")
            if head != b"PAR1" or tail[4:] != b"PAR1":
                raise ValueError("no PAR1 magic")
            if n > size - 12:
                raise ValueError(f"footer length {n} past the start of the file")
            f.seek(size - 8 - n)
            md = _Thrift(f.read(n)).struct()
        schema = md.get(2, [])
        if not schema:
            raise ValueError("no schema")
        cols, j = [], 1

        def skip(i):
            k = i + 1
            for _ in range(schema[i].get(5, 0)):
                k = skip(k)
            return k

        for _ in range(schema[0].get(5, 0)):
            cols.append(schema[j].get(4, b"").decode())
            j = skip(j)
        meta = {kv.get(1, b"").decode(): kv.get(2, b"").decode() for kv in md.get(5, [])}
        return {"num_rows": md.get(3, 0), "columns": cols, "metadata": meta,
                "created_by": md.get(6, b"").decode()}
    except (OSError, ValueError, IndexError, KeyError, AttributeError, UnicodeDecodeError, RecursionError,
            struct.error) as ex:
        raise CorruptData(f"legorl_data: {path}: not a readable Parquet footer: {ex}") from None


# ---------------------------------------------------------------- checkpoints

_ST_DTYPES = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "I64": "<i8", "I32": "<i4", "I16": "<i2",
              "I8": "i1", "U64": "<u8", "U32": "<u4", "U16": "<u2", "U8": "u1", "BOOL": "?"}


def read_safetensors(path):
    """Reads a safetensors file with numpy: ({name: array}, metadata dict). BF16 becomes float32."""
    import numpy as np
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as ex:
        raise LegorlDataError(f"legorl_data: {ex}") from None

    def bad(why):
        return CorruptData(f"legorl_data: {path}: not a valid safetensors file: {why}")

    if len(data) < 8:
        raise bad("shorter than its header length")
    n = int.from_bytes(data[:8], "little")
    if n > len(data) - 8:
        raise bad(f"header length {n} past the end of the file")
    try:
        header = json.loads(data[8:8 + n])
    except ValueError as ex:
        raise bad(f"header: {ex}") from None
    if not isinstance(header, dict):
        raise bad("header is not an object")
    meta = header.pop("__metadata__", None) or {}
    body = memoryview(data)[8 + n:]
    out = {}
    for name, info in header.items():
        try:
            dt, shape, (a, b) = info["dtype"], [int(s) for s in info["shape"]], info["data_offsets"]
        except (KeyError, TypeError, ValueError):
            raise bad(f"tensor {name!r}: bad entry") from None
        count = 1
        for s in shape:
            count *= s
        item = 2 if dt == "BF16" else np.dtype(_ST_DTYPES[dt]).itemsize if dt in _ST_DTYPES else None
        if item is None:
            raise bad(f"tensor {name!r}: unknown dtype {dt}")
        if not (0 <= a <= b <= len(body)) or b - a != count * item or min(shape, default=0) < 0:
            raise bad(f"tensor {name!r}: offsets {a}..{b} do not hold {shape} {dt}")
        if dt == "BF16":
            arr = (np.frombuffer(body[a:b], dtype="<u2").astype(np.uint32) << 16).view(np.float32)
        else:
            arr = np.frombuffer(body[a:b], dtype=_ST_DTYPES[dt])
        out[name] = arr.reshape(shape)
    return out, meta


def read_lineage(ckpt):
    """A checkpoint's lineage.json as a dict; LegorlDataError when missing or unreadable."""
    p = os.path.join(ckpt, LINEAGE_FILE)
    try:
        with open(p, "rb") as f:
            return json.loads(f.read())
    except FileNotFoundError:
        raise LegorlDataError(f"legorl_data: {ckpt} has no {LINEAGE_FILE}: not written by `legorl train`") from None
    except (OSError, ValueError) as ex:
        raise CorruptData(f"legorl_data: {p}: {ex}") from None


def recomputed_logprobs(ckpt):
    """The logprobs `legorl train` recomputed for each segment, as a DataFrame.

    Columns: rollout_id, segment_index, recomputed (a float32 array, one per
    completion token). The file's metadata (run_id, iteration,
    policy_version, replay) is in DataFrame.attrs.
    """
    import pandas as pd
    path = os.path.join(ckpt, RECOMPUTED_FILE)
    if not os.path.isfile(path):
        raise LegorlDataError(f"legorl_data: {ckpt} has no {RECOMPUTED_FILE}: not written by `legorl train`")
    tensors, meta = read_safetensors(path)
    if meta.get("format") != "legorl-recomputed-logprobs":
        raise CorruptData(f"legorl_data: {path}: format {meta.get('format')!r}, want legorl-recomputed-logprobs")
    rows = []
    for name, arr in tensors.items():
        rid, _, seg = name.rpartition("/")
        if not rid or not seg.isdigit():
            raise CorruptData(f"legorl_data: {path}: tensor name {name!r} is not ROLLOUT_ID/SEGMENT_INDEX")
        rows.append({"rollout_id": rid, "segment_index": int(seg), "recomputed": arr.astype("float32")})
    df = pd.DataFrame(rows, columns=["rollout_id", "segment_index", "recomputed"])
    df.attrs.update(meta)
    return df


def _check_name(what, s):
    if not isinstance(s, str) or not _NAME_RE.match(s):
        raise LegorlDataError(f"legorl_data: {what} {s!r}: want 1-128 of [A-Za-z0-9._-], starting with a letter or digit")
