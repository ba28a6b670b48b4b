"""End-to-end: activation checkpointing recomputes bit for bit, on the GPU tier or with checkpoints on the CPU.

The bundled GPT example (examples/gpt) is trained 4 steps on the cpu backend
keeping every activation (--activation-checkpointing=none, the default GPU
tier), then under GPU budgets below what that run keeps for backward:

  auto at 1.5 MiB:           the compiler recomputes segments in backward
  auto at 1 MiB, --tile=none: it recomputes, and the GPU cannot keep even the
                             checkpoints: the spill pass moves them to the CPU
                             tier between forward and backward

Each run's losses and saved weights must equal the reference bit for bit
(recomputing runs the same kernels on the same inputs), the report must say
what was recomputed, and the measured GPU high-water mark must stay within
the budget. A nanoGPT-style model with nn.Dropout(0.1) everywhere, exported
in training mode with dynamic axes, recomputes every layer
(--activation-checkpointing=every-layer) with the same masks: Dropout's
counter-based generator is keyed by the node's seed_id and the step, so the
recomputed Dropout draws the mask the forward one drew.

Run: ZINC_BUILD_DIR=/path/to/build /usr/bin/python3 -m unittest discover -s test/e2e -p test_activation_checkpointing.py
"""

import json
import os
import re
import sys
import tempfile
import unittest

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "test", "lib"))
from harness import run_tool, tools  # noqa: E402
import models  # noqa: E402
import safetensors_io  # noqa: E402

GPT = os.path.join(ROOT, "examples", "gpt", "gpt.onnx")
GPT_DATA = os.path.join(ROOT, "examples", "gpt", "data.safetensors")
STEPS = 4


class Runs:
    """Compiles and trains one model under several flag sets."""

    def __init__(self, tmp, model, data, extra=()):
        self.compile_bin, self.run_bin = tools()
        self.tmp, self.model, self.data, self.extra = tmp, model, data, list(extra)

    def train(self, name, flags):
        d = os.path.join(self.tmp, name)
        os.makedirs(d)
        plan, report = os.path.join(d, "plan.txt"), os.path.join(d, "report.json")
        metrics, weights = os.path.join(d, "metrics.jsonl"), os.path.join(d, "w.safetensors")
        compiled = run_tool([self.compile_bin, self.model, "-o", plan, "--emit=text",
                             "--report=" + report] + self.extra + flags)
        run_tool([self.run_bin, plan, "--backend=cpu", "--steps=%d" % STEPS, "--seed=7",
                  "--data=" + self.data, "--metrics=" + metrics, "--save-weights=" + weights])
        with open(report) as f:
            rep = json.load(f)
        with open(metrics) as f:
            lines = [json.loads(line) for line in f]
        with open(plan) as f:
            text = f.read()
        return {"report": rep, "losses": [m["loss"] for m in lines], "metrics": lines,
                "weights": safetensors_io.load_file(weights), "plan": text,
                "note": compiled.stderr.decode()}


def spilled_to_cpu(plan_text):
    """Names of the values the plan copies out of the GPU and back: the
    spill pass's `<value>@spill` tensors."""
    return set(re.findall(r'name: "(.*?)@spill"', plan_text))


class CheckpointingTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmpdir = tempfile.TemporaryDirectory(prefix="zinc-checkpointing-")
        cls.gpt = Runs(cls.tmpdir.name, GPT, GPT_DATA)
        cls.reference = cls.gpt.train("keep-everything", ["--activation-checkpointing=none"])
        cls.kept = cls.reference["report"]["activation_checkpointing"]["saved_bytes_before"]

    @classmethod
    def tearDownClass(cls):
        cls.tmpdir.cleanup()

    def assert_identical(self, run, reference):
        self.assertEqual(run["losses"], reference["losses"])
        self.assertEqual(sorted(run["weights"]), sorted(reference["weights"]))
        for name, w in reference["weights"].items():
            self.assertTrue(np.array_equal(np.asarray(run["weights"][name]), np.asarray(w)),
                            "weight %s differs" % name)

    def assert_within(self, run, capacity):
        self.assertLessEqual(run["report"]["per_rank"]["tiers"]["gpu"]["peak"], capacity)
        for m in run["metrics"]:
            self.assertLessEqual(m["peak_bytes"]["gpu"], capacity)

    def test_reference_keeps_everything(self):
        ac = self.reference["report"]["activation_checkpointing"]
        self.assertEqual(ac["mode"], "none")
        self.assertEqual(ac["recomputed_segments"], 0)
        self.assertGreater(self.kept, 0)

    def test_auto_recomputes_under_a_budget_below_the_activations(self):
        capacity = 1536 * 1024
        # The budget is below what keeping everything needs on the GPU.
        self.assertGreater(self.reference["report"]["per_rank"]["tiers"]["gpu"]["peak"],
                           capacity)
        run = self.gpt.train("auto-1.5MiB", ["--gpu-mem=%d" % capacity])
        ac = run["report"]["activation_checkpointing"]
        self.assertEqual(ac["mode"], "auto")
        self.assertGreaterEqual(ac["recomputed_segments"], 1)
        self.assertGreater(ac["recompute_flops"], 0)
        self.assertLess(ac["saved_bytes_after"], ac["saved_bytes_before"])
        self.assertTrue(ac["checkpoints"])
        self.assertIn("activation checkpointing:", run["note"])
        self.assertIn("@recompute", run["plan"])
        self.assert_identical(run, self.reference)
        self.assert_within(run, capacity)

    def test_checkpoints_on_the_cpu_tier(self):
        capacity = 1024 * 1024
        run = self.gpt.train("auto-1MiB", ["--gpu-mem=%d" % capacity, "--tile=none"])
        ac = run["report"]["activation_checkpointing"]
        self.assertGreaterEqual(ac["recomputed_segments"], 1)
        moved = spilled_to_cpu(run["plan"]) & set(ac["checkpoints"])
        self.assertTrue(moved, "no checkpoint went to the CPU tier: %s" % ac["checkpoints"])
        self.assertGreater(run["report"]["predicted_transfer_bytes_per_step"]["d2h"], 0)
        self.assert_identical(run, self.reference)
        self.assert_within(run, capacity)

    def test_tiled_and_checkpointed(self):
        """Tiles that write their share of a product in place, recomputed in
        backward (found in review: the recompute copied only the first
        tile's write, so backward read a half-written product)."""
        keep = self.gpt.train("tiled-keep", ["--tile=2", "--activation-checkpointing=none"])
        every = self.gpt.train("tiled-every-layer",
                               ["--tile=2", "--activation-checkpointing=every-layer"])
        self.assertGreaterEqual(
            every["report"]["activation_checkpointing"]["recomputed_segments"], 2)
        self.assertIn("FusedMatMulInto", every["plan"])
        self.assertRegex(every["plan"], r'name: ".*tile1.*@recompute"')
        self.assert_identical(every, keep)

    def test_none_and_every_layer_flags(self):
        every = self.gpt.train("every-layer", ["--activation-checkpointing=every-layer"])
        self.assertGreaterEqual(every["report"]["activation_checkpointing"]["recomputed_segments"],
                                2)
        self.assert_identical(every, self.reference)
        # Unbounded, auto keeps everything.
        auto = self.gpt.train("auto-roomy", [])
        self.assertEqual(auto["report"]["activation_checkpointing"]["recomputed_segments"], 0)


class DropoutRecomputeTest(unittest.TestCase):
    def test_every_layer_recomputes_the_same_masks(self):
        with tempfile.TemporaryDirectory(prefix="zinc-checkpointing-dropout-") as tmp:
            torch.manual_seed(0)
            model = models.NanoGPT(dropout=0.1).train()
            data = models.NanoGPT.make_data(np.random.default_rng(0))
            path = os.path.join(tmp, "nanogpt.onnx")
            models.export_training(model, data, 17, path)
            data_path = os.path.join(tmp, "data.safetensors")
            safetensors_io.save_file(data, data_path)
            runs = Runs(tmp, path, data_path, models.dim_flags(data))
            # Fused, attention's dropout is drawn inside zinc.Attention;
            # unfused, by a Dropout node: either must recompute its masks.
            for fused, op in (("true", "Attention"), ("false", "Dropout")):
                flags = ["--fuse-attention=" + fused]
                keep = runs.train("none-" + fused, ["--activation-checkpointing=none"] + flags)
                every = runs.train("every-layer-" + fused,
                                   ["--activation-checkpointing=every-layer"] + flags)
                self.assertGreaterEqual(
                    every["report"]["activation_checkpointing"]["recomputed_segments"], 2)
                blocks = every["plan"].split("\ninstructions {")[1:]
                self.assertTrue(any('op: "%s"' % op in b and "seed_id" in b and
                                    "@recompute" in b.split("}")[0] for b in blocks),
                                "no %s drawing a mask is recomputed" % op)
                self.assertEqual(every["losses"], keep["losses"])
                for name, w in keep["weights"].items():
                    self.assertTrue(np.array_equal(np.asarray(every["weights"][name]),
                                                   np.asarray(w)), name)

if __name__ == "__main__":
    unittest.main()
