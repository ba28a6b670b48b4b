"""zinc-run --init=random: parameters from the seeded generator, no weights file.

The model is bench/shape_gpt.py's GPT, whose external data file is never
written. Plans compiled with --lr=0 keep the initial values through a step,
so --save-weights shows exactly what the generator made:
  - matrices normal(0, 0.02), biases 0, LayerNorm scales 1, and the first
    loss near ln(vocab) (near-uniform logits);
  - the same values however the plan keeps them: one rank or ZeRO-3 over two
    (mpirun), tiled, parameters on NVMe, bf16 (the fp32 master saved);
  - --resume restores the checkpoint: --init=random only decides a fresh start;
  - the start-up report (time to first step and its parts) on stderr and in
    the first --metrics line, pinning 0 on the cpu backend;
  - an unknown --init value, and the missing file without --init=random, are
    one-line diagnostics;
  - with a CUDA device (skipped without one): the cuda backend, generating the
    GPU tier in device memory, makes the cpu backend's values.
"""

import json
import math
import os
import subprocess
import sys
import tempfile
import unittest

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "test", "lib"))
import safetensors_io as st  # noqa: E402
from harness import run_tool, tools  # noqa: E402
from test_zero import mpirun, run_ranks, read_metrics  # noqa: E402

VOCAB = 256


def load_weights(path):
    return {k: np.asarray(st.to_numpy(v)) for k, v in st.load_file(path).items()}


class InitRandomTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.compile_bin, cls.run_bin = tools()
        cls.tmp = tempfile.TemporaryDirectory(prefix="zinc-e2e-init-")
        cls.model = cls.path("gpt.onnx")
        run_tool([sys.executable, os.path.join(ROOT, "bench", "shape_gpt.py"), cls.model,
                  "--layers=2", "--d-model=64", "--heads=4", "--seq=32", "--batch=2",
                  "--vocab=%d" % VOCAB])
        assert not os.path.exists(cls.path("weights.bin"))
        cls.frozen = cls.compile_plan("frozen", "--lr=0")
        cls.frozen_weights = cls.run_plan(cls.frozen, "one-rank")[1]

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    @classmethod
    def path(cls, name):
        return os.path.join(cls.tmp.name, name)

    @classmethod
    def compile_plan(cls, name, *flags):
        plan = cls.path(name + ".zplan")
        run_tool([cls.compile_bin, cls.model, "-o", plan] + list(flags))
        return plan

    @classmethod
    def run_plan(cls, plan, tag, *flags, steps=1, launcher=()):
        metrics, weights = cls.path(tag + ".jsonl"), cls.path(tag + ".safetensors")
        argv = list(launcher) + [cls.run_bin, plan, "--init=random", "--seed=3",
                                 "--steps=%d" % steps, "--metrics=" + metrics,
                                 "--save-weights=" + weights] + list(flags)
        proc = run_ranks(argv) if launcher else run_tool(argv)
        return read_metrics(metrics), load_weights(weights), proc.stderr.decode()

    def test_matrices_biases_and_scales(self):
        w = self.frozen_weights
        for name, value in w.items():
            if value.ndim >= 2:
                self.assertAlmostEqual(float(value.std()), 0.02, delta=0.002, msg=name)
                self.assertLess(abs(float(value.mean())), 0.002, name)
            elif name.endswith("ln1.weight") or name.endswith("ln2.weight") or name == "ln_f.weight":
                np.testing.assert_array_equal(value, 1.0, err_msg=name)
            else:
                np.testing.assert_array_equal(value, 0.0, err_msg=name)
        self.assertIn("ln_f.weight", w)
        self.assertIn("blocks.0.fc.bias", w)
        loss = read_metrics(self.path("one-rank.jsonl"))[0]["loss"]
        self.assertAlmostEqual(loss, math.log(VOCAB), delta=0.1)

    def test_the_seed_decides(self):
        other = self.path("seed4.safetensors")
        run_tool([self.run_bin, self.frozen, "--init=random", "--seed=4",
                  "--save-weights=" + other])
        self.assertFalse(np.array_equal(load_weights(other)["head.weight"],
                                        self.frozen_weights["head.weight"]))

    def assert_same_values(self, got, what):
        self.assertEqual(sorted(got), sorted(self.frozen_weights), what)
        for name, value in got.items():
            np.testing.assert_array_equal(value, self.frozen_weights[name],
                                          err_msg="%s: %s" % (what, name))

    def test_same_values_tiled_on_nvme_and_in_bf16(self):
        nvme = self.path("nvme")
        os.makedirs(nvme, exist_ok=True)
        for tag, flags, run_flags in [
                ("tiled", ["--tile=2"], []),
                ("nvme", ["--offload-params=nvme", "--offload-optimizer=nvme"],
                 ["--nvme-dir=" + nvme]),
                ("bf16", ["--precision=bf16"], [])]:
            plan = self.compile_plan(tag, "--lr=0", *flags)
            self.assert_same_values(self.run_plan(plan, tag, *run_flags)[1], tag)

    def test_zero_shards_hold_the_one_rank_values(self):
        launcher = mpirun(2)
        plan = self.compile_plan("zero3", "--lr=0", "--ranks=2", "--zero-stage=3")
        self.assert_same_values(self.run_plan(plan, "zero3", launcher=launcher)[1],
                                "ZeRO-3 over 2 ranks")

    def test_resume_restores_the_checkpoint(self):
        plan = self.compile_plan("train", "--lr=0.01")
        whole = self.run_plan(plan, "whole", steps=4)[0]
        ckpt = self.path("ckpt")
        self.run_plan(plan, "first", "--checkpoint-dir=" + ckpt, steps=2)
        # A different seed for the generator: the checkpoint's values win.
        proc = run_tool([self.run_bin, plan, "--init=random", "--seed=9", "--resume=" + ckpt,
                         "--steps=4", "--metrics=" + self.path("rest.jsonl")])
        rest = read_metrics(self.path("rest.jsonl"))
        self.assertEqual([m["step"] for m in rest], [2, 3])
        self.assertEqual([m["loss"] for m in rest], [m["loss"] for m in whole[2:]])
        self.assertIn("resume", proc.stderr.decode())

    def test_startup_report(self):
        metrics, _, stderr = self.run_plan(self.frozen, "report", steps=2)
        startup = metrics[0]["startup"]
        self.assertEqual(startup["weights"], "random")
        self.assertEqual(startup["pin_seconds"], 0)
        self.assertEqual(startup["to_device_seconds"], 0)
        for key in ("plan_seconds", "weights_seconds", "first_step_seconds"):
            self.assertGreaterEqual(startup[key], 0, key)
        self.assertGreaterEqual(startup["seconds_to_first_step"],
                                startup["plan_seconds"] + startup["weights_seconds"] +
                                startup["first_step_seconds"])
        self.assertEqual(startup["first_step_seconds"], metrics[0]["seconds"])
        self.assertNotIn("startup", metrics[1])
        lines = [l for l in stderr.splitlines() if "time to first step" in l]
        self.assertEqual(len(lines), 1, stderr)
        self.assertRegex(lines[0], r"^zinc-run: note: time to first step [0-9.]+ s: plan [0-9.]+ s, "
                                   r"weights [0-9.]+ s \(random\), pinning 0\.000 s, ")

    def test_cuda_generates_the_cpu_values(self):
        """REQUIRES a CUDA device (skipped without): GPU-tier parameters made in
        device memory, CPU-tier ones by the loader, the same values as the cpu
        backend's within an ulp of f32 (the device's logf/sinf/cosf); the start-up
        report names the pinning."""
        plan = self.compile_plan("cuda", "--lr=0", "--offload-params=cpu",
                                 "--offload-optimizer=cpu")
        weights = self.path("cuda.safetensors")
        argv = [self.run_bin, plan, "--backend=cuda", "--init=random", "--seed=3",
                "--save-weights=" + weights]
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=600)
        if proc.returncode != 0 and ("needs a CUDA device" in proc.stderr or
                                     "built without" in proc.stderr):
            self.skipTest(proc.stderr.strip().splitlines()[-1])
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertRegex(proc.stderr, r"time to first step .* pinning [0-9.]+ s")
        for tag, got in [("offloaded", load_weights(weights))]:
            for name, value in got.items():
                np.testing.assert_allclose(value, self.frozen_weights[name], rtol=1e-6,
                                           atol=1e-9, err_msg="%s: %s" % (tag, name))
        resident = self.path("cuda-resident.safetensors")
        argv[-1] = "--save-weights=" + resident
        argv[1] = self.frozen
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=600)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        for name, value in load_weights(resident).items():
            np.testing.assert_allclose(value, self.frozen_weights[name], rtol=1e-6,
                                       atol=1e-9, err_msg="resident: " + name)

    def test_unknown_value_is_refused(self):
        proc = subprocess.run([self.run_bin, self.frozen, "--init=xavier"],
                              capture_output=True, text=True)
        self.assertEqual(proc.returncode, 1)
        self.assertEqual(proc.stderr.strip(),
                         "zinc-run: error: --init: unknown value 'xavier' (expected model or random)")

    def test_without_init_random_the_missing_file_is_named(self):
        proc = subprocess.run([self.run_bin, self.frozen], capture_output=True, text=True)
        self.assertEqual(proc.returncode, 1)
        self.assertIn("weights.bin: cannot open external data of initializer", proc.stderr)
        self.assertEqual(len(proc.stderr.strip().splitlines()), 1, proc.stderr)


if __name__ == "__main__":
    unittest.main()
