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
    rank, train as one rank's batch of 4, the gradients reduce-scattered
    every micro-batch or (--grad-reduce=step) once per step;
The nanoGPT recipe of issue 34 (AdamW, cosine schedule with warmup,
--clip-grad-norm=1.0, --grad-accum=4, a token file in sequential order)
against a plain PyTorch loop doing the same, 20 steps within 1e-4 relative;
the same with the optimizer on NVMe and the parameters on the CPU; 2 ZeRO-2
ranks within 1e-5 of one; bf16 tracking fp32; and the eval loss after 200
steps within 1% of PyTorch's.
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
                         "--grad-reduce=micro-batch", ranks=2)
        self.assert_same_training(self.one_batch(), got, 1e-5, "2 ranks x 2 micro-batches")

    def test_two_ranks_zero_stage_2_reduced_once_per_step(self):
        """--grad-reduce=step: each rank sums its micro-batches' whole
        gradients and reduce-scatters the sum once, in the last micro-batch:
        the same training, half the reduce-scatter bytes of 2 micro-batches
        reduced each."""
        zero = ["--ranks=2", "--zero-stage=2"]
        got = self.train("zero2-step", 1, 2, "micro2.safetensors", *zero,
                         "--grad-reduce=step", ranks=2)
        self.assert_same_training(self.one_batch(), got, 1e-5,
                                  "2 ranks x 2 micro-batches, reduced once per step")
        each = self.train("zero2", 1, 2, "micro2.safetensors", *zero,
                          "--grad-reduce=micro-batch", ranks=2)
        once, twice = (run[0][-1]["bytes"]["reduce_scatter"] for run in (got, each))
        self.assertGreater(once, 0)
        self.assertEqual(2 * once, twice)



class NanoGptRecipeTest(unittest.TestCase):
    """Issue 34's recipe on bench/nanogpt.py's model (a small config): AdamW
    (weight decay 0.1, beta2 0.95), 6e-4 with warmup and cosine decay,
    clip_grad_norm_ 1.0, 4 micro-batches of 2 windows per update, windows of
    a u16 token file (the bytes of the GPL's text) in sequential order;
    against a plain PyTorch loop on the same windows with transformers'
    factors. The same recipe with the optimizer on NVMe and the parameters on
    the CPU, on 2 ZeRO-2 ranks, and in bf16; and the eval loss after 200
    steps (the LGPL's text, sequential windows) against PyTorch's."""

    STEPS, ACCUM, ROWS, T, VOCAB, WARMUP = 20, 4, 2, 32, 256, 4
    LONG_STEPS, LONG_WARMUP, EVAL_STEPS = 200, 20, 4

    @classmethod
    def setUpClass(cls):
        import nanogpt
        cls.compile_bin, cls.run_bin = tools()
        cls.tmp = tempfile.TemporaryDirectory(prefix="zinc-e2e-recipe-")
        cls.config = nanogpt.Config("recipe", vocab=cls.VOCAB, n_layer=2, n_head=2, n_embd=64,
                                    block=cls.T, batch=cls.ROWS, seq=cls.T)
        cls.model = nanogpt.make_model(cls.config).train()  # seeded: export's weights
        nanogpt.export(cls.config, cls.path("nanogpt.onnx"))
        # English text, byte-level (base-files ships it on every Debian).
        cls.tokens = cls.byte_tokens("/usr/share/common-licenses/GPL-3", "train.bin")
        cls.eval_tokens = cls.byte_tokens("/usr/share/common-licenses/LGPL-2.1", "eval.bin")
        cls.runs = {}

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    @classmethod
    def path(cls, name):
        return os.path.join(cls.tmp.name, name)

    @classmethod
    def byte_tokens(cls, text, name):
        with open(text, "rb") as f:
            tokens = np.frombuffer(f.read(), np.uint8).astype(np.uint16)
        tokens.tofile(cls.path(name))
        return tokens

    def recipe(self, steps, warmup):
        return ["--lr=6e-4", "--weight-decay=0.1", "--beta2=0.95", "--lr-schedule=cosine",
                "--warmup-steps=%d" % warmup, "--total-steps=%d" % steps,
                "--clip-grad-norm=1.0", "--grad-accum=%d" % self.ACCUM]

    def train(self, name, flags=(), rows=ROWS, ranks=1, steps=STEPS, warmup=WARMUP,
              run_flags=()):
        """The metrics lines of zinc's run of the recipe."""
        if name in self.runs:
            return self.runs[name]
        plan, nvme = self.path(name + ".zplan"), self.path(name + ".nvme")
        os.makedirs(nvme, exist_ok=True)
        run_tool([self.compile_bin, self.path("nanogpt.onnx"), "-o", plan, "--dim",
                  "batch=%d" % rows, "--dim", "seq=%d" % self.T]
                 + self.recipe(steps, warmup) + list(flags))
        argv = [self.run_bin, plan, "--backend=cpu", "--steps=%d" % steps,
                "--data=" + self.path("train.bin"), "--data-format=tokens-u16",
                "--data-inputs=tokens,targets", "--data-order=sequential",
                "--nvme-dir=" + nvme, "--metrics=" + self.path(name + ".jsonl")]
        argv += list(run_flags)
        if ranks > 1:
            from test_zero import mpirun, run_ranks
            run_ranks(mpirun(ranks) + argv)
        else:
            run_tool(argv)
        self.runs[name] = read_metrics(self.path(name + ".jsonl"))
        return self.runs[name]

    def windows(self, tokens, batches):
        """{tokens, targets}: [batches, ROWS, T], row k of them (micro-batch
        after micro-batch) the window at (k * T) mod (len - T - 1)."""
        x = np.zeros((batches, self.ROWS, self.T), np.int64)
        y = np.zeros_like(x)
        for m in range(batches):
            for r in range(self.ROWS):
                o = ((m * self.ROWS + r) * self.T) % (len(tokens) - self.T - 1)
                x[m, r] = tokens[o:o + self.T]
                y[m, r] = tokens[o + 1:o + self.T + 1]
        return {"tokens": x, "targets": y}

    def reference(self, steps, warmup, norms=None):
        """(model, losses) of PyTorch's loop doing the recipe."""
        from test_lr_schedule import factors
        model = copy.deepcopy(self.model).train()
        losses = models.train_reference(
            model, self.windows(self.tokens, steps * self.ACCUM), "adamw", steps=steps,
            grad_accum=self.ACCUM, clip_grad_norm=1.0, grad_norms=norms,
            lr_factors=factors(self, "cosine", warmup, steps, steps + 1),
            lr=6e-4, weight_decay=0.1, betas=(0.9, 0.95))
        return model, losses

    def assert_losses(self, got, want, rtol, what):
        got_losses = [m["loss"] for m in got if "loss" in m]
        self.assertEqual(len(got_losses), len(want), what)
        for step, (g, w) in enumerate(zip(got_losses, want)):
            self.assertLessEqual(abs(g - w), rtol * abs(w), "%s, step %d loss: zinc %s\nwant %s"
                                 % (what, step, got_losses, want))

    def test_recipe_matches_pytorch(self):
        got = self.train("fp32")
        norms = []
        _, want = self.reference(self.STEPS, self.WARMUP, norms)
        self.assertEqual([m["step"] for m in got], list(range(self.STEPS)))
        self.assert_losses(got, want, 1e-4, "fp32")
        for step, (m, n) in enumerate(zip(got, norms)):
            self.assertLessEqual(abs(m["grad_norm"] - n), 1e-4 * n, "step %d grad_norm" % step)
        self.assertTrue(any(n > 1.0 for n in norms), "clipping never active: %s" % norms)
        self.assertLess(want[-1], want[0])

    def test_offloaded_recipe_matches_pytorch(self):
        got = self.train("offloaded", ["--offload-optimizer=nvme", "--offload-params=cpu"])
        _, want = self.reference(self.STEPS, self.WARMUP)
        self.assert_losses(got, want, 1e-4, "optimizer on NVMe, parameters on the CPU")
        self.assertGreater(got[-1]["bytes"]["nvme_read"], 0)

    def test_two_zero2_ranks_match_one_rank(self):
        # Each rank takes one of the global batch's two rows: rank 0's first,
        # so the windows are those of the one-rank run.
        one = [m["loss"] for m in self.train("fp32")]
        got = self.train("zero2", ["--ranks=2", "--zero-stage=2"], rows=1, ranks=2)
        self.assert_losses(got, one, 1e-5, "2 ZeRO-2 ranks against one")
        # ZeRO-3 with the gradients reduce-scattered once per step.
        got = self.train("zero3-step", ["--ranks=2", "--zero-stage=3", "--grad-reduce=step"],
                         rows=1, ranks=2)
        self.assert_losses(got, one, 1e-5, "2 ZeRO-3 ranks reducing once per step")

    def test_bf16_tracks_fp32(self):
        got = [m["loss"] for m in self.train("bf16", ["--precision=bf16"])]
        fp32 = [m["loss"] for m in self.train("fp32")]
        err = max(abs(g - w) / abs(w) for g, w in zip(got, fp32))
        print("\nnanoGPT recipe, bf16 against fp32 over %d steps: max relative loss error "
              "%.3g" % (self.STEPS, err), file=sys.stderr)
        self.assertLess(err, 1e-2)
        self.assertGreater(err, 0, "a bf16 run that is bit-identical to fp32 did not use bf16")

    def test_eval_loss_after_200_steps_within_1_percent(self):
        got = self.train("long", steps=self.LONG_STEPS, warmup=self.LONG_WARMUP,
                         run_flags=["--eval-data=" + self.path("eval.bin"),
                                    "--eval-every=%d" % (self.LONG_STEPS // 2),
                                    "--eval-steps=%d" % self.EVAL_STEPS])
        evals = [m for m in got if "eval_loss" in m]
        self.assertEqual([m["step"] for m in evals],
                         [self.LONG_STEPS // 2 - 1, self.LONG_STEPS - 1])
        model, _ = self.reference(self.LONG_STEPS, self.LONG_WARMUP)
        model.eval()
        held_out = self.windows(self.eval_tokens, self.EVAL_STEPS)
        with torch.no_grad():
            want = sum(float(model(*models.step_inputs(held_out, j)))
                       for j in range(self.EVAL_STEPS)) / self.EVAL_STEPS
        got_loss = evals[-1]["eval_loss"]
        print("\nnanoGPT recipe, eval loss after %d steps: zinc %.6f, PyTorch %.6f (first "
              "evaluation %.6f)" % (self.LONG_STEPS, got_loss, want, evals[0]["eval_loss"]),
              file=sys.stderr)
        self.assertLessEqual(abs(got_loss - want), 0.01 * want)
        # It learned: the held-out loss is well below a uniform byte's.
        self.assertLess(got_loss, 0.8 * np.log(self.VOCAB))


if __name__ == "__main__":
    unittest.main()
