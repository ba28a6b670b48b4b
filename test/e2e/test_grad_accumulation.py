"""End-to-end: --grad-accum=N, gradient accumulation.

zinc-compile --grad-accum=N makes each optimizer step run forward and
backward on N micro-batches, summing their gradients in f32 accumulators
with each micro-batch's loss gradient 1/N, as `(loss / N).backward()` per
micro-batch does, then update once; the data's step axis counts
micro-batches, and the "loss" of a step's metrics line is the mean of its
micro-batches'. The GPT decoder of models.py, exported as users export for
training:
  - 4 micro-batches of 1 row train as one batch of 4 rows (the same tokens):
    losses within 1e-5 relative, weights within rounding, and both track
    PyTorch accumulating the same way;
  - the same with the optimizer on NVMe and the parameters on the CPU: the
    micro-batches' gradients are summed on the host in CPU memory, the
    states are read and written once per step, not once per micro-batch
    (the NVMe bytes of a step are those of a step without accumulation);
  - 2 ranks (mpirun) at ZeRO stage 2, 2 micro-batches of 1 row each per
    rank, train as one rank's batch of 4;
The nanoGPT recipe of issue 34 (AdamW, cosine schedule with warmup,
--clip-grad-norm=1.0, --grad-accum=4, a token file in sequential order)
against a plain PyTorch loop doing the same, 20 steps within 1e-4 relative.
The pass itself: test/lit/passes/accumulate-gradients.onnxtxt.
"""

import copy
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
sys.path.insert(0, os.path.join(ROOT, "bench"))
import models  # noqa: E402
import safetensors_io as st  # noqa: E402
from harness import LOSS_RTOL, run_tool, tools  # noqa: E402

STEPS = 3
BATCH = 4
SEQ = 32
WEIGHT_RTOL = 1e-3  # of the largest weight: Adam turns rounding of tiny gradients into steps


def read_metrics(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def micro_batches(data, n):
    """The steps of `data` ([steps, batch, ...]) as n micro-batches each of
    batch / n rows: [steps * n, batch / n, ...], the rows in order."""
    out = {}
    for k, v in data.items():
        steps, batch = v.shape[:2]
        out[k] = np.ascontiguousarray(v.reshape((steps * n, batch // n) + v.shape[2:]))
    return out


class GptAccumulationTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.compile_bin, cls.run_bin = tools()
        cls.tmp = tempfile.TemporaryDirectory(prefix="zinc-e2e-accum-")
        torch.manual_seed(0)
        model, data = models.build("gpt")
        cls.model = model
        cls.data = {k: np.ascontiguousarray(v[:STEPS, :BATCH, :SEQ]) for k, v in data.items()}
        cls.onnx = cls.path("gpt.onnx")
        models.export_training(model, cls.data, 17, cls.onnx)
        st.save_file(cls.data, cls.path("batches.safetensors"))
        st.save_file(micro_batches(cls.data, 4), cls.path("micro4.safetensors"))
        st.save_file(micro_batches(cls.data, 2), cls.path("micro2.safetensors"))
        cls.runs = {}

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    @classmethod
    def path(cls, name):
        return os.path.join(cls.tmp.name, name)

    def train(self, name, batch, accum, data, *flags, run_flags=(), ranks=1):
        """(metrics, weights) of STEPS optimizer steps."""
        if name in self.runs:
            return self.runs[name]
        plan = self.path(name + ".zplan")
        run_tool([self.compile_bin, self.onnx, "-o", plan, "--dim", "batch=%d" % batch,
                  "--dim", "seq=%d" % SEQ, "--grad-accum=%d" % accum] + list(flags))
        nvme = self.path(name + ".nvme")
        os.makedirs(nvme, exist_ok=True)
        argv = [self.run_bin, plan, "--backend=cpu", "--steps=%d" % STEPS,
                "--data=" + self.path(data), "--nvme-dir=" + nvme,
                "--metrics=" + self.path(name + ".jsonl"),
                "--save-weights=" + self.path(name + "-weights.safetensors")] + list(run_flags)
        if ranks > 1:
            from test_zero import mpirun, run_ranks
            run_ranks(mpirun(ranks) + argv)
        else:
            run_tool(argv)
        result = (read_metrics(self.path(name + ".jsonl")),
                  st.load_file(self.path(name + "-weights.safetensors")))
        self.runs[name] = result
        return result

    def assert_same_training(self, want, got, rtol, what):
        (want_m, want_w), (got_m, got_w) = want, got
        self.assertEqual([m["step"] for m in got_m], list(range(STEPS)), what)
        for w, g in zip(want_m, got_m):
            self.assertLessEqual(abs(g["loss"] - w["loss"]), rtol * abs(w["loss"]),
                                 "%s: step %d loss %r, want %r" % (what, w["step"], g["loss"],
                                                                   w["loss"]))
        self.assertEqual(sorted(got_w), sorted(want_w), what)
        for name, w in want_w.items():
            scale = max(float(np.abs(w).max()), 1e-3)
            self.assertLessEqual(float(np.abs(got_w[name] - w).max()), WEIGHT_RTOL * scale,
                                 "%s: weight %s" % (what, name))

    def one_batch(self):
        return self.train("batch4", BATCH, 1, "batches.safetensors")

    def test_micro_batches_train_as_one_batch(self):
        want = self.one_batch()
        got = self.train("micro4", 1, 4, "micro4.safetensors")
        self.assert_same_training(want, got, 1e-5, "4 micro-batches of 1")
        # PyTorch, accumulating the same way, gives the same losses, and
        # training moved them: the comparison above can tell.
        reference = models.train_reference(
            copy.deepcopy(self.model).train(), micro_batches(self.data, 4),
            steps=STEPS, grad_accum=4)
        self.assertGreater(abs(reference[-1] - reference[0]), 100 * LOSS_RTOL * reference[0])
        for step, (m, w) in enumerate(zip(got[0], reference)):
            self.assertLessEqual(abs(m["loss"] - w), LOSS_RTOL * abs(w), "step %d" % step)

    def test_offloaded_states_move_once_per_step(self):
        offload = ["--offload-optimizer=nvme", "--offload-params=cpu"]
        plain = self.train("nvme1", BATCH, 1, "batches.safetensors", *offload)
        got = self.train("nvme4", 1, 4, "micro4.safetensors", *offload)
        self.assert_same_training(self.one_batch(), got, 1e-5, "offloaded, 4 micro-batches")
        self.assert_same_training(plain, got, 1e-5, "offloaded, 4 micro-batches vs 1")
        # The optimizer's NVMe traffic (states read and written back) is once
        # per step, and the accumulators stay in CPU memory: a step of 4
        # micro-batches moves what a step of one batch moves.
        for kind in ("nvme_read", "nvme_write"):
            one, four = plain[0][-1]["bytes"][kind], got[0][-1]["bytes"][kind]
            self.assertGreater(one, 0, kind)
            self.assertEqual(four, one, "%s per step: %d with 4 micro-batches, %d with one "
                             "batch" % (kind, four, one))

    def test_two_ranks_zero_stage_2(self):
        got = self.train("zero2", 1, 2, "micro2.safetensors", "--ranks=2", "--zero-stage=2",
                         ranks=2)
        self.assert_same_training(self.one_batch(), got, 1e-5, "2 ranks x 2 micro-batches")



class NanoGptRecipeTest(unittest.TestCase):
    """Issue 34's recipe on bench/nanogpt.py's model (a small config): AdamW
    (weight decay 0.1, beta2 0.95), 6e-4 with 4 updates of warmup and cosine
    decay over 20, clip_grad_norm_ 1.0, 4 micro-batches of 2 windows per
    update, windows of a u16 token file (the bytes of the GPL's text) in
    sequential order; against a plain
    PyTorch loop on the same windows with transformers' factors."""

    STEPS, ACCUM, ROWS, T, VOCAB = 20, 4, 2, 32, 256

    def test_recipe_matches_pytorch(self):
        import nanogpt
        from test_lr_schedule import factors
        c = nanogpt.Config("recipe", vocab=self.VOCAB, n_layer=2, n_head=2, n_embd=64,
                           block=self.T, batch=self.ROWS, seq=self.T)
        tmp = tempfile.TemporaryDirectory(prefix="zinc-e2e-recipe-")
        self.addCleanup(tmp.cleanup)
        path = lambda f: os.path.join(tmp.name, f)  # noqa: E731
        nanogpt.export(c, path("nanogpt.onnx"))
        # English text, byte-level (base-files ships it on every Debian).
        with open("/usr/share/common-licenses/GPL-3", "rb") as f:
            tokens = np.frombuffer(f.read(), np.uint8).astype(np.uint16)
        tokens.tofile(path("train.bin"))
        compile_bin, run_bin = tools()
        recipe = ["--lr=6e-4", "--weight-decay=0.1", "--beta2=0.95", "--lr-schedule=cosine",
                  "--warmup-steps=4", "--total-steps=%d" % self.STEPS, "--clip-grad-norm=1.0",
                  "--grad-accum=%d" % self.ACCUM]
        run_tool([compile_bin, path("nanogpt.onnx"), "-o", path("plan.zplan"), "--dim",
                  "batch=%d" % self.ROWS, "--dim", "seq=%d" % self.T] + recipe)
        run_tool([run_bin, path("plan.zplan"), "--backend=cpu", "--steps=%d" % self.STEPS,
                  "--data=" + path("train.bin"), "--data-format=tokens-u16",
                  "--data-inputs=tokens,targets", "--data-order=sequential",
                  "--metrics=" + path("metrics.jsonl")])
        got = read_metrics(path("metrics.jsonl"))

        # Row k of the run (micro-batch after micro-batch) is the window at
        # (k * T) mod (len - T - 1).
        micro = self.STEPS * self.ACCUM
        x = np.zeros((micro, self.ROWS, self.T), np.int64)
        y = np.zeros_like(x)
        for m in range(micro):
            for r in range(self.ROWS):
                o = ((m * self.ROWS + r) * self.T) % (len(tokens) - self.T - 1)
                x[m, r] = tokens[o:o + self.T]
                y[m, r] = tokens[o + 1:o + self.T + 1]
        norms = []
        want = models.train_reference(
            nanogpt.make_model(c).train(), {"tokens": x, "targets": y}, "adamw",
            steps=self.STEPS, grad_accum=self.ACCUM, clip_grad_norm=1.0, grad_norms=norms,
            lr_factors=factors(self, "cosine", 4, self.STEPS, self.STEPS + 1),
            lr=6e-4, weight_decay=0.1, betas=(0.9, 0.95))
        self.assertEqual([m["step"] for m in got], list(range(self.STEPS)))
        for step, (m, w, n) in enumerate(zip(got, want, norms)):
            self.assertLessEqual(abs(m["loss"] - w), 1e-4 * abs(w),
                                 "step %d loss: zinc %s\nPyTorch %s"
                                 % (step, [g["loss"] for g in got], want))
            self.assertLessEqual(abs(m["grad_norm"] - n), 1e-4 * n, "step %d grad_norm" % step)
        self.assertTrue(any(n > 1.0 for n in norms), "clipping never active: %s" % norms)
        self.assertLess(want[-1], want[0])


if __name__ == "__main__":
    unittest.main()
