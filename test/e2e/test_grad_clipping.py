"""End-to-end: --clip-grad-norm against torch.nn.utils.clip_grad_norm_.

zinc-compile --clip-grad-norm=MAX multiplies every trained gradient by
min(1, MAX / (norm + 1e-6)) before the update, norm the 2-norm over all of
them, as clip_grad_norm_(model.parameters(), MAX) between backward and
optimizer.step() does. Each case picks MAX well below the gradients' norm,
so clipping is active at every step (asserted on PyTorch's norms and on
zinc's "grad_norm" metrics), and checks losses, weights and updates against
PyTorch as test_train_vs_pytorch.py does:
  - the MLP with SGD (momentum, Nesterov: the update is proportional to the
    clipped gradient, so a wrong coefficient shows at once);
  - the GPT decoder with AdamW, whole and with every weight tiled (--tile=2:
    each tile is a parameter of its own, all in one norm);
  - the GPT over 2 ranks (mpirun) at ZeRO stage 3, whose gradients are
    reduce-scattered shards (each rank sums its shard's squares, an
    all-reduce adds them), and at stage 0 (whole all-reduced gradients, no
    second reduction), against PyTorch on the global batch;
  - fp16 with dynamic loss scaling whose first step overflows: skipped
    steps stay skipped (their norm is reported as not finite), and the
    applied steps clip the unscaled gradients, tracking an fp32 run with the
    same clipping over their batches as closely as fp16 tracks fp32 without
    clipping (test_mixed_precision.py's bound).
The pass itself and the refusals: test/lit/passes/clip-grad-norm.onnxtxt.
"""

import json
import os
import sys
import tempfile
import unittest

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "test", "lib"))
import models  # noqa: E402
import safetensors_io as st  # noqa: E402
from harness import ADAMW, LOSS_RTOL, SGD, TrainingComparison, run_tool  # noqa: E402


def read_metrics(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


class ClipVsPytorchTest(TrainingComparison, unittest.TestCase):
    def clip_case(self, name, optimizer, max_norm, compile_flags=(), delayed=False, **kw):
        norms = []
        # Exported as users export for training: training mode, dynamic axes.
        model, data = models.build(name)
        self.check(name, 17, optimizer, build=lambda: (model, data),
                   export=models.export_training,
                   compile_flags=models.dim_flags(data) +
                   ["--clip-grad-norm=%r" % max_norm] + list(compile_flags),
                   reference_kw={"clip_grad_norm": max_norm, "grad_norms": norms,
                                 "delayed": delayed}, **kw)
        # The float32 reference's norms (the float64 run appends after them).
        want = norms[:models.STEPS]
        self.assertTrue(all(n > 2 * max_norm for n in want),
                        "clipping is not active at every step: norms %s, max %g"
                        % (want, max_norm))
        metrics = read_metrics(os.path.join(self.root, "%s-opset17-%s" % (name, optimizer[0]),
                                            "metrics.jsonl"))
        got = [m["grad_norm"] for m in metrics]
        for step, (g, w) in enumerate(zip(got, want)):
            self.assertLessEqual(abs(g - w), 1e-4 * w, "step %d grad_norm: zinc %s, PyTorch %s"
                                 % (step, got, want))

    def test_mlp_sgd(self):
        self.clip_case("mlp", SGD, 0.05)

    def test_gpt_adamw(self):
        self.clip_case("gpt", ADAMW, 0.1)

    def test_mlp_sgd_delayed_update(self):
        """--dpu: the update of step i applies step i-1's gradients clipped by
        their own norm (stored with them), as a PyTorch loop that clips, keeps
        the gradients and applies them a step late. SGD, whose step is the
        clipped gradient itself (Adam's would hardly see the clipping)."""
        self.clip_case("mlp", SGD, 0.05, compile_flags=["--dpu", "--offload-optimizer=cpu"],
                       delayed=True)

    def test_gpt_adamw_tiled(self):
        self.clip_case("gpt", ADAMW, 0.1, compile_flags=["--tile=2"])


class ClipZeroTest(unittest.TestCase):
    """The GPT on 2 ranks, 2 rows each, against PyTorch on batches of 4."""

    MAX = 0.1

    @classmethod
    def setUpClass(cls):
        from test_zero import mpirun, run_ranks
        from harness import tools
        cls.mpirun, cls.run_ranks = staticmethod(mpirun), staticmethod(run_ranks)
        cls.compile_bin, cls.run_bin = tools()
        cls.tmp = tempfile.TemporaryDirectory(prefix="zinc-e2e-clip-zero-")
        import torch
        torch.manual_seed(0)
        model, data = models.build("gpt")
        cls.steps = 4
        cls.data = {k: np.ascontiguousarray(v[:cls.steps]) for k, v in data.items()}
        cls.onnx = cls.path("gpt.onnx")
        models.export_training(model, cls.data, 17, cls.onnx)
        st.save_file(cls.data, cls.path("data.safetensors"))
        cls.norms = []
        cls.losses = models.train_reference(model, cls.data, steps=cls.steps,
                                            clip_grad_norm=cls.MAX, grad_norms=cls.norms)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    @classmethod
    def path(cls, name):
        return os.path.join(cls.tmp.name, name)

    def check_stage(self, stage):
        plan = self.path("zero%d.zplan" % stage)
        run_tool([self.compile_bin, self.onnx, "--dim", "batch=2", "--dim", "seq=32", "-o", plan,
                  "--ranks=2", "--zero-stage=%d" % stage, "--clip-grad-norm=%r" % self.MAX])
        metrics = self.path("zero%d.jsonl" % stage)
        self.run_ranks(self.mpirun(2) + [
            self.run_bin, plan, "--backend=cpu", "--steps=%d" % self.steps,
            "--data=" + self.path("data.safetensors"), "--metrics=" + metrics])
        got = read_metrics(metrics)
        self.assertTrue(all(n > 2 * self.MAX for n in self.norms), self.norms)
        for step, (m, loss, norm) in enumerate(zip(got, self.losses, self.norms)):
            self.assertLessEqual(abs(m["loss"] - loss), LOSS_RTOL * abs(loss),
                                 "stage %d step %d loss" % (stage, step))
            self.assertLessEqual(abs(m["grad_norm"] - norm), 1e-4 * norm,
                                 "stage %d step %d grad_norm" % (stage, step))

    def test_zero_stage_3(self):
        self.check_stage(3)

    def test_zero_stage_0(self):
        self.check_stage(0)


class ClipFp16Test(unittest.TestCase):
    """test_mixed_precision.py's MLP, SGD, with GradScaler's first scale,
    which its gradients overflow."""

    MAX = 0.2
    FLAGS = ["--optimizer=sgd", "--lr=0.1", "--momentum=0.9"]

    @classmethod
    def setUpClass(cls):
        import test_mixed_precision as mp
        cls.mp = mp
        mp.Tools.find()
        cls.tmp = tempfile.TemporaryDirectory(prefix="zinc-e2e-clip-fp16-")
        rng = np.random.default_rng(7)
        text, cls.initial = mp.mlp_text(rng)
        cls.model = os.path.join(cls.tmp.name, "mlp.onnxtxt")
        with open(cls.model, "w") as f:
            f.write(text)
        cls.batches = mp.mlp_data(rng)
        cls.data = os.path.join(cls.tmp.name, "data.safetensors")
        st.save_file(cls.batches, cls.data)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_overflowed_steps_skip_and_the_rest_clip(self):
        mp = self.mp
        t = mp.Trainer(self, self.tmp.name, self.model, self.data)
        clip = ["--clip-grad-norm=%r" % self.MAX]
        fp16, _, _ = t.train("fp16-clip", self.FLAGS + clip + [
            "--precision=fp16", "--initial-loss-scale=65536"])
        skipped = [m["skipped"] for m in fp16]
        applied_steps = [i for i, s in enumerate(skipped) if not s]
        self.assertTrue(skipped[0], "GradScaler's first scale did not overflow: %s" % skipped)
        self.assertGreaterEqual(len(applied_steps), 4, skipped)
        # A skipped step changes nothing (weights, momentum): the applied
        # ones are an fp32 run from the initial weights over their batches.
        rest = os.path.join(self.tmp.name, "applied.safetensors")
        st.save_file({n: np.ascontiguousarray(v[applied_steps])
                      for n, v in self.batches.items()}, rest)
        shifted = mp.Trainer(self, self.tmp.name, self.model, rest)
        steps = len(applied_steps)
        fp32 = shifted.train("fp32-clip", self.FLAGS + clip, steps=steps)[0]
        unclipped = shifted.train("fp32", self.FLAGS, steps=steps)[0]
        applied = [fp16[i] for i in applied_steps]
        for i in range(len(skipped)):
            if skipped[i]:
                self.assertIsNone(fp16[i]["grad_norm"], "an overflowed step's norm")
                self.assertTrue(fp16[i]["nonfinite"])
        self.assertTrue(all(m["grad_norm"] > 2 * self.MAX for m in fp32), fp32)
        err = mp.max_rel_err(applied, fp32)
        self.assertLess(err, mp.LOSS_RTOL_FP16)
        for a, b in zip(applied, fp32):
            self.assertLessEqual(abs(a["grad_norm"] - b["grad_norm"]),
                                 mp.LOSS_RTOL_FP16 * b["grad_norm"], (applied, fp32))
        # Without clipping the same steps go elsewhere: the comparison above
        # could tell.
        self.assertGreater(mp.max_rel_err(unclipped, fp32), 10 * mp.LOSS_RTOL_FP16)


if __name__ == "__main__":
    unittest.main()
