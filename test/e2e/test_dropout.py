"""End-to-end: nn.Dropout exported in training mode, trained by zinc.

PyTorch exports nn.Dropout(p) in training mode
(torch.onnx.export(..., training=torch.onnx.TrainingMode.TRAINING), opset 17)
as Dropout(data, ratio, training_mode) with Constant ratio and training_mode
inputs. zinc draws the keep mask from Philox4x32-10 keyed by the run seed
(zinc-run --seed) with the step, the node's seed_id and the element in the
counter. Checks:
  - a probe model that outputs dropout(ones): every element is 0 or exactly
    1 / (1 - 0.1) in float32, and the kept fraction is within 4 sigma of 0.9;
    the same seed repeats the mask, another seed or step draws another, and
    --mode=infer makes Dropout the identity;
  - an MLP with nn.Dropout(0.1): the same seed gives bit-identical losses
    and saved weights, a different seed different losses;
  - the MLP trained for 200 steps (AdamW, lr 3e-3) from PyTorch's initial
    weights on the same data: the mean loss of the last 20 steps is within 5%
    of PyTorch's (the mean over a few of PyTorch's own seeds: the masks differ,
    the distributions match). Without dropout the same mean is about 9% lower,
    so the check sees a dropout that does nothing.
The finite-difference check of Dropout's gradient, with the mask held fixed,
is test/unit/autodiff/DropoutGradTest.cpp.

The tools come from $ZINC_BUILD_DIR/tools (default ./build/tools); missing
tools skip the tests unless ZINC_BUILD_DIR is set.

Run: ZINC_BUILD_DIR=/path/to/build /usr/bin/python3 -m unittest test.e2e.test_dropout
"""

import json
import os
import subprocess
import sys
import tempfile
import unittest

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "test", "lib"))
import models  # noqa: E402
from harness import run_tool, tools  # noqa: E402
import safetensors_io as st  # noqa: E402

P = 0.1
TIMEOUT = 300
TRAIN_STEPS = 200
TAIL = 20
LOSS_RTOL = 0.05
LR = 3e-3
REFERENCE_SEEDS = (1, 2, 3, 4)


class Probe(nn.Module):
    """Outputs dropout(x) beside a loss that trains w through it."""
    ROWS, COLS = 64, 1024

    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.linspace(-1, 1, self.COLS))
        self.drop = nn.Dropout(P)

    def forward(self, x):
        d = self.drop(x)
        return (d * self.w).sum(), d


class DropoutMLP(nn.Module):
    IN, HIDDEN, CLASSES, BATCH = 32, 64, 10, 16

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(self.IN, self.HIDDEN)
        self.drop = nn.Dropout(P)
        self.fc2 = nn.Linear(self.HIDDEN, self.CLASSES)

    def forward(self, x, targets):
        return F.cross_entropy(self.fc2(self.drop(F.relu(self.fc1(x)))), targets)

    @classmethod
    def make_data(cls, steps, rng):
        x = rng.standard_normal((steps, cls.BATCH, cls.IN)).astype(np.float32)
        w = rng.standard_normal((cls.IN, cls.CLASSES))
        y = np.argmax(x @ w, axis=-1).astype(np.int64)
        return {"x": x, "targets": y}


def export_training(model, args, path, input_names, output_names):
    torch.onnx.export(model, args, path, input_names=input_names,
                      output_names=output_names, opset_version=17,
                      do_constant_folding=False,
                      training=torch.onnx.TrainingMode.TRAINING)


def train_reference(model, data, steps, seed):
    """PyTorch's losses over `steps` steps (step i feeds slice i mod len),
    dropout drawn from torch's generator seeded with `seed`."""
    torch.manual_seed(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=LR)
    n = len(data["x"])
    losses = []
    for i in range(steps):
        opt.zero_grad()
        loss = model(torch.from_numpy(data["x"][i % n]),
                     torch.from_numpy(data["targets"][i % n]))
        loss.backward()
        opt.step()
        losses.append(float(loss))
    return losses


class DropoutTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.compile_bin, cls.run_bin = tools()
        torch.set_num_threads(1)
        cls.tmp = tempfile.TemporaryDirectory(prefix="zinc-e2e-dropout-")
        cls.root = cls.tmp.name

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def path(self, name):
        return os.path.join(self.root, name)

    # -- the probe: mask statistics and exact scale -------------------------

    def probe_plans(self):
        if not os.path.exists(self.path("probe.infer.zplan")):
            torch.manual_seed(0)
            model = Probe().train()
            ones = torch.ones(Probe.ROWS, Probe.COLS)
            export_training(model, (ones,), self.path("probe.onnx"), ["x"],
                            ["loss", "dropped"])
            st.save_file({"x": np.ones((1, Probe.ROWS, Probe.COLS), np.float32)},
                         self.path("ones.safetensors"))
            run_tool([self.compile_bin, self.path("probe.onnx"), "-o",
                      self.path("probe.zplan")])
            run_tool([self.compile_bin, self.path("probe.onnx"), "--mode=infer",
                      "-o", self.path("probe.infer.zplan")])
        return self.path("probe.zplan"), self.path("probe.infer.zplan")

    def dropped(self, plan, seed, steps=1):
        out = self.path("dropped-%s-%d-%d.safetensors"
                        % (os.path.basename(plan), seed, steps))
        run_tool([self.run_bin, plan, "--steps=%d" % steps, "--seed=%d" % seed,
                  "--data=" + self.path("ones.safetensors"), "--save-outputs=" + out])
        return st.load_file(out)["dropped"]

    def test_kept_fraction_and_exact_scale(self):
        plan, _ = self.probe_plans()
        d = self.dropped(plan, seed=1)
        self.assertEqual(d.dtype, np.float32)
        self.assertEqual(d.shape, (Probe.ROWS, Probe.COLS))
        scale = np.float32(1) / (np.float32(1) - np.float32(P))
        kept = d != 0
        self.assertTrue(np.all(d[kept] == scale),
                        "kept elements differ from 1/(1-p) = %r: %r"
                        % (scale, np.unique(d[kept])[:8]))
        n = d.size
        sigma = np.sqrt(n * P * (1 - P))
        self.assertLess(abs(int(kept.sum()) - n * (1 - P)), 4 * sigma,
                        "kept %d of %d" % (kept.sum(), n))

    def test_masks_follow_seed_and_step(self):
        plan, infer = self.probe_plans()
        first = self.dropped(plan, seed=7)
        np.testing.assert_array_equal(self.dropped(plan, seed=7), first)
        self.assertFalse(np.array_equal(self.dropped(plan, seed=8), first),
                         "another seed drew the same mask")
        # --save-outputs keeps the last step: step 2 draws another mask.
        self.assertFalse(np.array_equal(self.dropped(plan, seed=7, steps=2), first),
                         "another step drew the same mask")
        # Inference: the identity.
        np.testing.assert_array_equal(self.dropped(infer, seed=7),
                                      np.ones((Probe.ROWS, Probe.COLS), np.float32))

    # -- the MLP: determinism and training against PyTorch ------------------

    def mlp(self):
        if not os.path.exists(self.path("mlp.zplan")):
            torch.manual_seed(0)
            model = DropoutMLP()
            data = DropoutMLP.make_data(TRAIN_STEPS, np.random.default_rng(0))
            args = (torch.from_numpy(data["x"][0]), torch.from_numpy(data["targets"][0]))
            export_training(model.train(), args, self.path("mlp.onnx"),
                            ["x", "targets"], ["loss"])
            st.save_file(data, self.path("mlp.safetensors"))
            run_tool([self.compile_bin, self.path("mlp.onnx"), "-o",
                      self.path("mlp.zplan"), "--lr=%g" % LR])
            type(self).mlp_model, type(self).mlp_data = model, data
        return self.path("mlp.zplan")

    def train_zinc(self, seed, steps, tag, extra=()):
        metrics = self.path("metrics-%s.jsonl" % tag)
        weights = self.path("weights-%s.safetensors" % tag)
        run_tool([self.run_bin, self.mlp(), "--steps=%d" % steps, "--seed=%d" % seed,
                  "--data=" + self.path("mlp.safetensors"), "--metrics=" + metrics,
                  "--save-weights=" + weights] + list(extra))
        with open(metrics) as f:
            losses = [json.loads(line)["loss"] for line in f if line.strip()]
        with open(weights, "rb") as f:
            return losses, f.read()

    def test_same_seed_is_bit_identical(self):
        losses, weights = self.train_zinc(seed=11, steps=10, tag="a")
        again, weights_again = self.train_zinc(seed=11, steps=10, tag="b")
        self.assertEqual(losses, again)
        self.assertEqual(weights, weights_again, "saved weights differ")
        other, weights_other = self.train_zinc(seed=12, steps=10, tag="c")
        self.assertNotEqual(losses, other, "another seed gave the same losses")
        self.assertNotEqual(weights, weights_other)

    def test_resume_from_a_checkpoint_is_bit_identical(self):
        # The training-mode export: its Dropout masks follow the seed and the
        # step, so 4 steps, a checkpoint and a resume to 10 are 10 steps.
        losses, weights = self.train_zinc(seed=11, steps=10, tag="straight")
        ck = self.path("ck")
        first, _ = self.train_zinc(seed=11, steps=4, tag="first",
                                   extra=["--checkpoint-dir=" + ck])
        # The checkpoint's seed wins over the (default) one given here.
        rest, resumed = self.train_zinc(seed=0, steps=10, tag="rest",
                                        extra=["--resume=" + ck])
        self.assertEqual(first + rest, losses)
        self.assertEqual(resumed, weights, "resumed weights differ")

    def test_training_matches_pytorch_in_distribution(self):
        import copy
        import onnx
        from onnx import numpy_helper
        self.mlp()
        model, data = self.mlp_model, self.mlp_data
        # zinc starts from the exported initializers: they must be PyTorch's
        # initial weights.
        inits = {t.name: numpy_helper.to_array(t)
                 for t in onnx.load(self.path("mlp.onnx")).graph.initializer}
        models.initializer_map(model, inits)

        want = [np.mean(train_reference(copy.deepcopy(model).train(), data,
                                        TRAIN_STEPS, s)[-TAIL:])
                for s in REFERENCE_SEEDS]
        losses, _ = self.train_zinc(seed=5, steps=TRAIN_STEPS, tag="long")
        self.assertEqual(len(losses), TRAIN_STEPS)
        got = float(np.mean(losses[-TAIL:]))
        ref = float(np.mean(want))
        self.assertLessEqual(abs(got - ref), LOSS_RTOL * ref,
                             "mean loss of the last %d steps: zinc %.4f, PyTorch %.4f "
                             "(per seed %s)" % (TAIL, got, ref,
                                                ", ".join("%.4f" % w for w in want)))


if __name__ == "__main__":
    unittest.main()
