"""Tests of legorl_data: tables read back whole and typed, and bad input (no
such run, a run with no data yet, a missing table, corrupt files and
manifests, no binary) raises a clear one-line error.

The table tests need a store with the runs "fixture" (`legorl demo`) and
"aligned" (rollouts and segments only, trained by `legorl train`), as
cmd/legorl's TestNotebooks makes: it runs this file with
LEGORL_TEST_STORE, LEGORL_TEST_CHECKPOINT (a checkpoint trained on
"aligned") and LEGORL_BIN set. The footer and safetensors parsers are
also tested on files made here. Run with Debian's Python:

    cd notebooks && /usr/bin/python3 -m unittest -v test_legorl_data
"""

import json
import os
import shutil
import struct
import tempfile
import unittest
from unittest import mock

import numpy as np

import legorl_data as ld

STORE = os.environ.get("LEGORL_TEST_STORE", "")
CHECKPOINT = os.environ.get("LEGORL_TEST_CHECKPOINT", "")
needs_store = unittest.skipUnless(STORE, "set LEGORL_TEST_STORE (cmd/legorl TestNotebooks does)")


def one_line(test, err):
    msg = str(err)
    test.assertNotIn("\n", msg)
    test.assertTrue(msg.startswith("legorl_data: "), msg)
    return msg


class Tmp(unittest.TestCase):
    def setUp(self):
        base = os.environ.get("LEGORL_TEST_TMP")
        if base:
            os.makedirs(base, exist_ok=True)
        self.tmp = tempfile.mkdtemp(dir=base)
        self.addCleanup(shutil.rmtree, self.tmp, True)

    def copy_store(self):
        dst = os.path.join(self.tmp, "store")
        shutil.copytree(ld.file_root(STORE), dst)
        for dirpath, dirs, files in os.walk(dst):
            for n in dirs + files:
                os.chmod(os.path.join(dirpath, n), 0o755)
        return "file://" + dst


@needs_store
class LoadTable(Tmp):
    def test_every_table_reads_back_whole_and_typed(self):
        for table in ld.RUN_TABLES:
            with self.subTest(table=table):
                df = ld.load_table(STORE, "fixture", table)
                want = sum(e["rows"] for e in ld.table_files(STORE, "fixture", table))
                self.assertEqual(len(df), want)
                self.assertTrue((df.run_id == "fixture").all())
                for c in ld.FLOAT_COLUMNS[table]:
                    self.assertEqual(df[c].dtype, np.float64, c)
        r = ld.load_table(STORE, "fixture", "rollouts")
        self.assertIsInstance(r.p2p_passed.iloc[0], list)
        self.assertTrue(set(r.reward[r.status == "completed"]) <= {0.0, 1.0})
        s = ld.load_table(STORE, "fixture", "segments")
        self.assertTrue((s.logprobs.map(len) == s.completion_token_ids.map(len)).all())

    def test_backend_without_pyarrow_is_export(self):
        with mock.patch.dict(os.environ, {"LEGORL_DATA_BACKEND": "export"}):
            self.assertEqual(ld.backend(STORE), "export")
        with mock.patch.dict(os.environ, {"LEGORL_DATA_BACKEND": "arrow"}):
            with self.assertRaises(ld.LegorlDataError):
                ld.backend(STORE)
        self.assertEqual(ld.backend("s3://bucket/prefix"), "export")

    def test_no_such_run(self):
        with self.assertRaises(ld.NoSuchRun) as cm:
            ld.load_table(STORE, "nope", "rollouts")
        msg = one_line(self, cm.exception)
        self.assertIn("no such run 'nope'", msg)
        self.assertIn("runs there: aligned, fixture", msg)

    def test_run_with_no_data_yet(self):
        store = self.copy_store()
        # A run whose writers started but committed nothing yet.
        os.makedirs(os.path.join(ld.file_root(store), "runs", "fresh", "data", "rollouts", "iter-000000"))
        with self.assertRaises(ld.NoSuchRun) as cm:
            ld.load_table(store, "fresh", "rollouts")
        self.assertIn("nothing committed under runs/fresh/", one_line(self, cm.exception))
        self.assertNotIn("fresh", ld.list_runs(store))

    def test_store_folder_missing(self):
        with self.assertRaises(ld.NoSuchRun) as cm:
            ld.load_table("file://" + os.path.join(self.tmp, "nowhere"), "fixture", "rollouts")
        self.assertIn("does not exist", one_line(self, cm.exception))

    def test_missing_table(self):
        with self.assertRaises(ld.MissingTable) as cm:
            ld.load_table(STORE, "aligned", "steps")
        msg = one_line(self, cm.exception)
        self.assertIn("run 'aligned' has no committed steps table", msg)
        self.assertIsInstance(cm.exception, ld.LegorlDataError)

    def test_bad_arguments(self):
        for run, table, want in [("fixture", "trajectories", "unknown table 'trajectories'"),
                                 ("../etc", "rollouts", "run id '../etc'"),
                                 ("", "rollouts", "run id ''")]:
            with self.subTest(run=run, table=table):
                with self.assertRaises(ld.LegorlDataError) as cm:
                    ld.load_table(STORE, run, table)
                self.assertIn(want, one_line(self, cm.exception))

    def test_corrupt_file_surfaces_legorls_error(self):
        store = self.copy_store()
        e = ld.table_files(store, "fixture", "rollouts")[1]
        path = ld.object_path(store, e["key"])
        with open(path, "r+b") as f:
            f.seek(e["size"] // 2)
            b = f.read(1)
            f.seek(e["size"] // 2)
            f.write(bytes([b[0] ^ 0xFF]))
        with self.assertRaises(ld.CorruptData) as cm:
            ld.load_table(store, "fixture", "rollouts")
        msg = one_line(self, cm.exception)
        self.assertIn("rollouts of run 'fixture' is corrupt: legorl export: storage: checksum mismatch", msg)
        self.assertIn(e["key"], msg)
        with self.assertRaises(ld.CorruptData):
            ld.verify_file(store, e)
        # The other tables still read.
        self.assertEqual(len(ld.load_table(store, "fixture", "train_steps")), 6)

    def test_truncated_file(self):
        store = self.copy_store()
        e = ld.table_files(store, "fixture", "steps")[0]
        path = ld.object_path(store, e["key"])
        with open(path, "r+b") as f:
            f.truncate(e["size"] - 100)
        with self.assertRaises(ld.CorruptData) as cm:
            ld.load_table(store, "fixture", "steps")
        one_line(self, cm.exception)
        with self.assertRaises(ld.CorruptData) as cm:
            ld.parquet_footer(path)
        self.assertIn("not a readable Parquet footer", one_line(self, cm.exception))

    def test_corrupt_manifest(self):
        store = self.copy_store()
        key = [k for k in ld.manifest_keys(store, "fixture") if "/train/" in k][-1]
        with open(ld.object_path(store, key), "w") as f:
            f.write('{"run_id": "fixture", "files": [')
        with self.assertRaises(ld.CorruptData) as cm:
            ld.load_table(store, "fixture", "train_steps")
        self.assertIn("bad manifest", one_line(self, cm.exception))
        with self.assertRaises(ld.CorruptData) as cm:
            ld.manifests(store, "fixture")
        self.assertIn(key, one_line(self, cm.exception))

    def test_missing_binary(self):
        with mock.patch.dict(os.environ, {"LEGORL_BIN": os.path.join(self.tmp, "no-legorl"), "LEGORL_DATA_BACKEND": "export"}):
            with self.assertRaises(ld.LegorlDataError) as cm:
                ld.load_table(STORE, "fixture", "rollouts")
        self.assertIn("is not an executable file", one_line(self, cm.exception))

    def test_settings_from_the_environment(self):
        env = {k: v for k, v in os.environ.items() if k not in ("LEGORL_RUN", "LEGORL_CHECKPOINTS")}
        env["LEGORL_STORE"] = STORE
        with mock.patch.dict(os.environ, env, clear=True):
            self.assertEqual(ld.store(), STORE)
            with self.assertRaises(ld.LegorlDataError) as cm:
                ld.run_id()
            self.assertIn("runs in the store: aligned, fixture", one_line(self, cm.exception))
            self.assertEqual(ld.checkpoints(), [])
            os.environ["LEGORL_RUN"] = "fixture"
            self.assertEqual(ld.run_id(), "fixture")
            os.environ["LEGORL_CHECKPOINTS"] = os.path.join(self.tmp, "missing")
            with self.assertRaises(ld.LegorlDataError) as cm:
                ld.checkpoints()
            self.assertIn("does not exist", one_line(self, cm.exception))
        with mock.patch.dict(os.environ, {}, clear=True):
            self.assertTrue(ld.store().startswith("file://") and ld.store().endswith("/legorl-data"))


@needs_store
class Footers(unittest.TestCase):
    def test_footers_match_manifests(self):
        for m in ld.manifests(STORE, "fixture"):
            for e in m["files"]:
                f = ld.parquet_footer(ld.verify_file(STORE, e))
                self.assertEqual(f["num_rows"], e["rows"], e["key"])
                ld.check_footer(e, f["metadata"], "fixture")
                self.assertEqual(f["metadata"]["legorl.schema_version"], str(ld.SCHEMA_VERSION))
                self.assertEqual(f["columns"][:2], ["run_id", "iteration"], e["key"])
        self.assertEqual(len(ld.manifests(STORE, "fixture")), 6)  # 3 iterations x (rollout, train)

    def test_footer_of_another_table_or_run_is_refused(self):
        e = ld.table_files(STORE, "fixture", "steps")[0]
        meta = ld.parquet_footer(ld.verify_file(STORE, e))["metadata"]
        with self.assertRaises(ld.CorruptData):
            ld.check_footer(dict(e, table="rollouts"), meta, "fixture")
        with self.assertRaises(ld.CorruptData):
            ld.check_footer(e, meta, "other")
        with self.assertRaises(ld.CorruptData):
            ld.check_footer(e, dict(meta, **{"legorl.schema_version": str(ld.SCHEMA_VERSION + 1)}), "fixture")


class NotParquet(Tmp):
    def test_garbage(self):
        for name, body in [("empty", b""), ("text", b"hello world, not parquet at all"),
                           ("bad length", b"PAR1" + b"\0" * 8 + b"\xff\xff\xff\x7fPAR1"),
                           ("bad thrift", b"PAR1" + b"\xff" * 16 + (16).to_bytes(4, "little") + b"PAR1")]:
            with self.subTest(name):
                p = os.path.join(self.tmp, name)
                with open(p, "wb") as f:
                    f.write(body)
                with self.assertRaises(ld.CorruptData) as cm:
                    ld.parquet_footer(p)
                one_line(self, cm.exception)


def write_safetensors(path, tensors, meta):
    header, body = {"__metadata__": meta}, b""
    for name, (dtype, shape, raw) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(body), len(body) + len(raw)]}
        body += raw
    h = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + body)


class Safetensors(Tmp):
    def test_dtypes(self):
        p = os.path.join(self.tmp, "t.safetensors")
        f32 = np.array([[1.5, -2.0, 0.25], [3.0, 4.0, -0.5]], dtype="<f4")
        bf16 = (np.array([1.0, -2.5, 3.140625], dtype="<f4").view("<u4") >> 16).astype("<u2")
        i64 = np.array([7, -9], dtype="<i8")
        write_safetensors(p, {"a/0": ("F32", [2, 3], f32.tobytes()), "b": ("BF16", [3], bf16.tobytes()),
                              "c": ("I64", [2], i64.tobytes()), "empty": ("F32", [0], b"")}, {"k": "v"})
        ts, meta = ld.read_safetensors(p)
        self.assertEqual(meta, {"k": "v"})
        np.testing.assert_array_equal(ts["a/0"], f32)
        np.testing.assert_array_equal(ts["b"], np.array([1.0, -2.5, 3.140625], dtype=np.float32))
        np.testing.assert_array_equal(ts["c"], i64)
        self.assertEqual(ts["empty"].shape, (0,))

    def test_bad_files(self):
        good = os.path.join(self.tmp, "good")
        write_safetensors(good, {"x": ("F32", [2], np.zeros(2, "<f4").tobytes())}, {})
        with open(good, "rb") as f:
            raw = f.read()
        cases = {
            "short": b"\x01\x02",
            "header past the end": struct.pack("<Q", 1 << 40) + b"{}",
            "not json": struct.pack("<Q", 3) + b"{{{",
            "data past the end": raw[:-4],
            "unknown dtype": raw.replace(b'"F32"', b'"F99"'),
        }
        for name, body in cases.items():
            with self.subTest(name):
                p = os.path.join(self.tmp, name)
                with open(p, "wb") as f:
                    f.write(body)
                with self.assertRaises(ld.CorruptData) as cm:
                    ld.read_safetensors(p)
                self.assertIn("not a valid safetensors file", one_line(self, cm.exception))

    @unittest.skipUnless(CHECKPOINT and STORE, "set LEGORL_TEST_CHECKPOINT and LEGORL_TEST_STORE")
    def test_recomputed_logprobs_of_a_checkpoint(self):
        rec = ld.recomputed_logprobs(CHECKPOINT)
        self.assertEqual(rec.attrs["run_id"], "aligned")
        self.assertEqual(rec.attrs["replay"], "true")
        lin = ld.read_lineage(CHECKPOINT)
        self.assertEqual(len(rec), lin["data"]["segments"])
        segs = ld.load_table(STORE, "aligned", "segments").merge(rec, on=["rollout_id", "segment_index"])
        self.assertEqual(len(segs), len(rec))
        for r in segs.itertuples():
            self.assertEqual(len(r.recomputed), len(r.completion_token_ids))
        with self.assertRaises(ld.LegorlDataError) as cm:
            ld.recomputed_logprobs(self.tmp)
        self.assertIn("not written by `legorl train`", one_line(self, cm.exception))


if __name__ == "__main__":
    unittest.main()
