"""End-to-end: an operator bigger than the GPU trains once the compiler tiles it.

A language model as users write one (nn.Embedding, a hidden nn.Linear with
ReLU, a vocabulary projection nn.Linear, cross-entropy), vocabulary 32768 and
width 256, so the projection's weight alone is 32 MiB in fp32 (the
embedding's too), is exported in training mode with dynamic batch and
sequence axes and trained 4 steps on the cpu backend:

  untiled: --tile=none, the default GPU tier (every tensor fits)
  tiled:   --gpu-mem=16MiB, half the projection's weight, --tile=auto

With 16 MiB neither the projection nor the embedding can be on the GPU
whole, so the compiler must tile both (the report's `tiling` list says how)
and place their tiles off the GPU between uses. The tiled run's losses
track the untiled run's within 1e-6 relative per step (the input gradient
sums the tiles' contributions in another order, so the last bits may move)
and PyTorch's within the e2e tolerance; the saved weights are the untiled
ones (whole tensors keyed by initializer name, reassembled from the tiles);
and the GPU tier's measured high-water mark (metrics peak_bytes, pages the
arena touched) stays within the capacity.

Run: ZINC_BUILD_DIR=/path/to/build /usr/bin/python3 -m unittest discover -s test/e2e -p test_tiling.py
"""

import json
import os
import subprocess
import sys
import tempfile
import unittest

import numpy as np
import torch
from torch import nn

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "test", "lib"))
from harness import LOSS_RTOL, run_tool, tools  # noqa: E402
import safetensors_io  # noqa: E402

VOCAB, WIDTH, BATCH, SEQ, STEPS = 32768, 256, 2, 8, 4
CAPACITY = 16 * 1024 * 1024  # half of the projection's 32 MiB
PAGE = 4096


class TinyLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, WIDTH)
        self.hidden = nn.Linear(WIDTH, WIDTH)
        self.proj = nn.Linear(WIDTH, VOCAB)

    def forward(self, tokens, targets):
        logits = self.proj(torch.relu(self.hidden(self.emb(tokens))))
        return nn.functional.cross_entropy(logits.reshape(-1, VOCAB), targets.reshape(-1))


class TilingTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.compile_bin, cls.run_bin = tools()
        cls.tmp = tempfile.TemporaryDirectory(prefix="zinc-tiling-")
        cls.model_path = os.path.join(cls.tmp.name, "lm.onnx")
        cls.data_path = os.path.join(cls.tmp.name, "data.safetensors")
        torch.manual_seed(0)
        model = TinyLM()
        rng = np.random.default_rng(0)
        tokens = rng.integers(0, VOCAB, size=(STEPS, BATCH, SEQ))
        targets = np.roll(tokens, -1, axis=2)
        dynamic = {"tokens": {0: "batch", 1: "seq"}, "targets": {0: "batch", 1: "seq"}}
        torch.onnx.export(model, (torch.from_numpy(tokens[0]), torch.from_numpy(targets[0])),
                          cls.model_path, input_names=["tokens", "targets"],
                          output_names=["loss"], opset_version=17, do_constant_folding=False,
                          training=torch.onnx.TrainingMode.TRAINING, dynamic_axes=dynamic)
        safetensors_io.save_file({"tokens": tokens.astype(np.int64),
                                  "targets": targets.astype(np.int64)}, cls.data_path)
        # PyTorch's own training of the same model and data.
        torch.set_num_threads(1)
        opt = torch.optim.AdamW(model.parameters())
        cls.torch_losses = []
        for i in range(STEPS):
            opt.zero_grad()
            loss = model(torch.from_numpy(tokens[i]), torch.from_numpy(targets[i]))
            loss.backward()
            opt.step()
            cls.torch_losses.append(float(loss))
        cls.untiled = cls.train_plan("untiled", ["--tile=none"])
        cls.tiled = cls.train_plan("tiled", ["--gpu-mem=%d" % CAPACITY])

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def train(self, name, flags):
        return self.train_plan(name, flags)

    @classmethod
    def train_plan(cls, name, flags):
        d = os.path.join(cls.tmp.name, name)
        os.makedirs(d)
        plan, report = os.path.join(d, "plan.zplan"), os.path.join(d, "report.json")
        metrics, weights = os.path.join(d, "metrics.jsonl"), os.path.join(d, "w.safetensors")
        compiled = run_tool([cls.compile_bin, cls.model_path, "-o", plan, "--report=" + report,
                             "--dim", "batch=%d" % BATCH, "--dim", "seq=%d" % SEQ] + flags)
        run_tool([cls.run_bin, plan, "--backend=cpu", "--steps=%d" % STEPS,
                  "--data=" + cls.data_path, "--metrics=" + metrics,
                  "--save-weights=" + weights])
        dump = subprocess.run([os.path.join(os.path.dirname(cls.compile_bin), "zinc-dump"), plan],
                              stdout=subprocess.PIPE, check=True).stdout.decode()
        with open(report) as f:
            rep = json.load(f)
        with open(metrics) as f:
            lines = [json.loads(line) for line in f]
        return {"report": rep, "metrics": lines, "dump": dump,
                "weights": safetensors_io.load_file(weights), "note": compiled.stderr.decode()}

    def test_both_big_operators_are_tiled(self):
        tiling = {t["node"]: t for t in self.tiled["report"]["tiling"]}
        self.assertIn("/proj/MatMul", tiling, self.tiled["report"]["tiling"])
        self.assertIn("/emb/Gather", tiling, self.tiled["report"]["tiling"])
        self.assertEqual(tiling["/proj/MatMul"]["op"], "MatMul")
        for t in tiling.values():
            self.assertGreaterEqual(t["tiles"], 2)
        self.assertEqual(self.untiled["report"]["tiling"], [])
        # zinc-dump shows each tile of the projection as its own parameter.
        shares = [line for line in self.tiled["dump"].splitlines()
                  if '"proj.weight"' in line and "tile of [32768,256]" in line]
        self.assertEqual(len(shares), tiling["/proj/MatMul"]["tiles"])
        # The report counts the model once, tiled or not.
        self.assertEqual(self.tiled["report"]["model"], self.untiled["report"]["model"])

    def test_losses_track_the_untiled_run_and_pytorch(self):
        tiled = [m["loss"] for m in self.tiled["metrics"]]
        untiled = [m["loss"] for m in self.untiled["metrics"]]
        self.assertEqual(len(tiled), STEPS)
        for step, (a, b) in enumerate(zip(tiled, untiled)):
            self.assertLessEqual(abs(a - b), 1e-6 * abs(b), "step %d: %r vs %r" % (step, a, b))
        np.testing.assert_allclose(tiled, self.torch_losses, rtol=LOSS_RTOL)

    def test_weights_are_saved_whole(self):
        got, want = self.tiled["weights"], self.untiled["weights"]
        self.assertEqual(sorted(got), sorted(want))
        for name, w in want.items():
            w = np.asarray(w)
            self.assertEqual(np.asarray(got[name]).shape, w.shape, name)
            np.testing.assert_allclose(np.asarray(got[name]), w, rtol=0,
                                       atol=1e-5 * max(1.0, float(np.abs(w).max())),
                                       err_msg=name)

    def test_allocate_feeds_back_more_tiles(self):
        """At 4.25 MiB the first choice of tiles (aimed at half the GPU)
        overflows; zinc-compile aims lower (a quarter, an eighth) until the
        plan fits, and that plan trains the same."""
        capacity = 4352 * 1024
        run = self.train("feedback", ["--gpu-mem=%d" % capacity])
        self.assertIn("compiling again aiming at 1/4", run["note"])
        tiling = {t["node"]: t for t in run["report"]["tiling"]}
        first = {t["node"]: t for t in self.tiled["report"]["tiling"]}
        self.assertGreater(tiling["/proj/MatMul"]["tiles"], first["/proj/MatMul"]["tiles"])
        self.assertNotEqual(tiling["/proj/MatMul"]["reason"].find("(1/"), -1)
        for a, b in zip([m["loss"] for m in run["metrics"]],
                        [m["loss"] for m in self.untiled["metrics"]]):
            self.assertLessEqual(abs(a - b), 1e-6 * abs(b))
        for m in run["metrics"]:
            self.assertLessEqual(m["peak_bytes"]["gpu"], capacity)

    def test_measured_gpu_peak_within_the_capacity(self):
        proven = self.tiled["report"]["per_rank"]["tiers"]["gpu"]["peak"]
        self.assertLessEqual(proven, CAPACITY)
        for m in self.tiled["metrics"]:
            measured = m["peak_bytes"]["gpu"]
            self.assertGreater(measured, 0)
            self.assertLessEqual(measured, CAPACITY)
            self.assertLessEqual(measured, -(-proven // PAGE) * PAGE)
        # The projection's weight never sat on the GPU whole.
        self.assertLess(proven, VOCAB * WIDTH * 4)


if __name__ == "__main__":
    unittest.main()
