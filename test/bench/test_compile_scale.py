"""Smoke test of bench/compile_scale.py and its model generator, bench/shape_gpt.py.

A tiny shape-only GPT must pass onnx's checker (full check: strict shape
inference) and compile with zinc-compile without its weights; the benchmark
driver must compile its --quick models, read the plans right and write the
JSON. Needs zinc-compile: ZINC_BUILD_DIR (set by ctest), else ./build; a
missing binary is a failure, not a skip.
"""

import json
import os
import subprocess
import sys
import tempfile
import unittest

import numpy as np
import onnx

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BENCH = os.path.join(ROOT, "bench")
sys.path.insert(0, BENCH)
import compile_scale  # noqa: E402
import shape_gpt  # noqa: E402

BUILD = os.environ.get("ZINC_BUILD_DIR", os.path.join(ROOT, "build"))
COMPILER = os.path.join(BUILD, "tools", "zinc-compile")
TINY = shape_gpt.Config("tiny", 2, 64, 4, seq=32, vocab=64)


def external_end(model):
    """The byte after the last external-data tensor."""
    end = 0
    for t in model.graph.initializer:
        if t.data_location == onnx.TensorProto.EXTERNAL:
            kv = {e.key: e.value for e in t.external_data}
            end = max(end, int(kv["offset"]) + int(kv["length"]))
    return end


class ShapeGptTest(unittest.TestCase):
    def setUp(self):
        self.assertTrue(os.access(COMPILER, os.X_OK),
                        "%s is not built (set ZINC_BUILD_DIR)" % COMPILER)
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def test_model_is_valid_onnx_with_external_float_weights(self):
        path = os.path.join(self.dir, "tiny.onnx")
        model = shape_gpt.write_model(TINY, path)
        self.assertEqual(len(model.graph.node), shape_gpt.node_count(TINY))
        floats = [t for t in model.graph.initializer if t.data_type == onnx.TensorProto.FLOAT]
        self.assertTrue(floats)
        self.assertTrue(all(t.data_location == onnx.TensorProto.EXTERNAL for t in floats))
        self.assertEqual(sum(int(np.prod(t.dims)) for t in floats),
                         shape_gpt.param_count(TINY))
        self.assertFalse(os.path.exists(os.path.join(self.dir, "weights.bin")))
        # onnx's checker insists on the data file: give it a sparse one.
        data = os.path.join(self.dir, "weights.bin")
        with open(data, "wb") as f:
            f.truncate(external_end(model))
        onnx.checker.check_model(path, full_check=True)
        os.remove(data)

    def test_compiles_without_weights(self):
        path = os.path.join(self.dir, "tiny.onnx")
        shape_gpt.write_model(TINY, path)
        plan = os.path.join(self.dir, "tiny.zplan")
        text = os.path.join(self.dir, "tiny.txt")
        for out, emit in ((plan, "binary"), (text, "text")):
            proc = subprocess.run([COMPILER, path, "-o", out, "--emit=" + emit]
                                  + compile_scale.FLAGS,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            self.assertEqual(proc.returncode, 0, proc.stderr.decode())
            self.assertIn("external data file 'weights.bin'", proc.stderr.decode())
        # The driver's protobuf walk agrees with the plan's text form.
        stats = compile_scale.plan_stats(plan)
        with open(text) as f:
            lines = f.read().splitlines()
        self.assertEqual(stats["instructions"], lines.count("instructions {"))
        self.assertEqual(stats["tensors"], lines.count("tensors {"))
        self.assertGreater(stats["instructions"], shape_gpt.node_count(TINY))
        self.assertEqual(set(stats["tiers"]), {"gpu", "cpu", "nvme"})
        self.assertGreater(stats["tiers"]["nvme"]["peak"], 4 * shape_gpt.param_count(TINY))


class DriverTest(unittest.TestCase):
    def test_quick_run_writes_json(self):
        self.assertTrue(os.access(COMPILER, os.X_OK),
                        "%s is not built (set ZINC_BUILD_DIR)" % COMPILER)
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "result.json")
            proc = subprocess.run(
                [sys.executable, os.path.join(BENCH, "compile_scale.py"), "--quick",
                 "--build-dir", BUILD, "--out", out, "--timeout", "60", "--time-passes",
                 "--only", "layers-2,layers-4,gpt-tiny"],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            self.assertEqual(proc.returncode, 0,
                             proc.stdout.decode() + proc.stderr.decode())
            with open(out) as f:
                result = json.load(f)
        rows = {r["name"]: r for r in result["results"]}
        self.assertEqual(set(rows), {"layers-2", "layers-4", "gpt-tiny"})
        for r in rows.values():
            self.assertEqual(r["status"], "ok", r)
            self.assertNotIn("warning", r)
            self.assertGreater(r["seconds"], 0)
            self.assertGreater(r["peak_rss_kib"], 1024)
            self.assertGreater(r["plan"]["instructions"], r["config"]["onnx_nodes"])
            self.assertEqual(r["time_passes"]["reports"], 1)
            self.assertIn("Allocate Tiers (allocate)", r["time_passes"]["wall_seconds"])
            self.assertIn("emit", r["time_passes"]["phases"])
        self.assertEqual(result["scaling"]["layers"], [2, 4])
        self.assertIn("exponent", result["scaling"])
        self.assertEqual(result["flags"], compile_scale.FLAGS)


class HelpersTest(unittest.TestCase):
    def test_targets_are_the_goals_of_the_rows_and_ranks_run(self):
        def row(name, seconds, gib, status="ok"):
            return {"name": name, "status": status, "seconds": seconds,
                    "peak_rss_kib": gib * 1024 * 1024}
        one = compile_scale.targets(
            [row("depth-1000", 9.5, 1.2), row("gpt-1t", 3, 0.2)], None)
        self.assertEqual(one, {"depth-1000 under 10 s": True,
                               "depth-1000 under 1 GiB": False,
                               "gpt-1t under 10 s": True,
                               "gpt-1t under 1 GiB": True})
        many = compile_scale.targets(
            [row("gpt-1t", 59, 1.5), row("gpt-32t", 61, 3)], None, ranks=512)
        self.assertEqual(many, {"gpt-1t at 512 ranks under 60 s": True,
                                "gpt-1t at 512 ranks under 2 GiB": True,
                                "gpt-32t at 512 ranks under 60 s": False})
        failed = compile_scale.targets([row("gpt-32t", 1, 0.1, "timeout")], None, 512)
        self.assertEqual(failed, {"gpt-32t at 512 ranks under 60 s": False})

    def test_layers_for_nodes(self):
        n = shape_gpt.layers_for_nodes(100000)
        self.assertGreaterEqual(shape_gpt.node_count(shape_gpt.Config("x", n, 64, 4)), 100000)
        self.assertLess(shape_gpt.node_count(shape_gpt.Config("x", n - 1, 64, 4)), 100000)

    def test_loglog_slope(self):
        self.assertAlmostEqual(compile_scale.loglog_slope([1, 2, 4, 8], [3, 12, 48, 192]), 2.0)

    def test_parse_time_passes_sums_reports(self):
        report = """===---===
                       zinc pass execution timing report
===---===
  Total Execution Time: 0.0022 seconds (0.0022 wall clock)

   ---User Time---   --User+System--   ---Wall Time---  --- Name ---
   0.0021 ( 95.9%)   0.0021 ( 95.9%)   0.0021 ( 95.9%)  Allocate Tiers (allocate)
   0.0001 (  2.5%)   0.0001 (  2.5%)   0.0001 (  4.1%)  Place Tensors in Tiers (place)
   0.0022 (100.0%)   0.0022 (100.0%)   0.0022 (100.0%)  Total
"""
        parsed = compile_scale.parse_time_passes(report + "zinc-compile: note: x\n" + report)
        self.assertEqual(parsed["reports"], 2)
        self.assertAlmostEqual(parsed["wall_seconds"]["Allocate Tiers (allocate)"], 0.0042)
        self.assertAlmostEqual(parsed["wall_seconds"]["Place Tensors in Tiers (place)"], 0.0002)
        self.assertAlmostEqual(parsed["wall_seconds"]["(total of the reports)"], 0.0044)


if __name__ == "__main__":
    unittest.main()
