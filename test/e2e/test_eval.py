"""End-to-end: evaluation during training (zinc-run --eval-data).

A training plan carries its model's inference form (Plan.eval). With

    zinc-run PLAN --steps=4 --data=TRAIN --eval-data=EVAL --eval-every=2 \
             --eval-steps=2 --metrics=M --checkpoint-dir=C --checkpoint-every=2

zinc-run writes {"step": i, "eval_loss": x} after steps 1 and 3 (0-based: after
2 and 4 steps). Each must be, within 1e-5 relative, the mean of PyTorch's
eval-mode losses on EVAL's batches 0 and 1 with the weights zinc saved at that
point (the checkpoint's model.safetensors):
  - models.py's nanoGPT exported with Dropout 0.1 in training form: Dropout
    must be off in the evaluation (the training losses differ from PyTorch's
    by the masks, the evaluation ones must not);
  - the same nanoGPT trained on a token file (random windows) and evaluated
    on another, whose windows are sequential from its start, the same each
    evaluation;
  - the same nanoGPT on 2 ZeRO-3 ranks under mpirun, rank 0 evaluating
    alone on batches of one rank's rows;
  - resnet18 exported in training form: BatchNorm must normalise with the
    running statistics the training steps updated (batch statistics give
    another loss).

Run: ZINC_BUILD_DIR=/path/to/build /usr/bin/python3 -m unittest test.e2e.test_eval
"""

import copy
import json
import os
import sys
import tempfile
import unittest
import warnings

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "test", "lib"))
import models  # noqa: E402
import safetensors_io as st  # noqa: E402
import test_zero  # noqa: E402
from harness import run_tool, tools  # noqa: E402

RTOL = 1e-5
EVAL_EVERY, EVAL_STEPS = 2, 2


def nanogpt_dropout():
    torch.manual_seed(0)
    model = models.NanoGPT(dropout=0.1).eval()
    return (model, models.NanoGPT.make_data(np.random.default_rng(0)),
            models.NanoGPT.make_data(np.random.default_rng(1)))


def resnet18():
    model, data = models.build("resnet18")
    return model, data, models.ResNet18.make_data(np.random.default_rng(1))


def sequential_windows(tokens, batches):
    """{idx, targets}: [batches, B, T], row k of them at (k*T) mod (len-T-1)."""
    b, t, n = models.NanoGPT.BATCH, models.NanoGPT.SEQ, len(tokens)
    x = np.zeros((batches, b, t), np.int64)
    y = np.zeros((batches, b, t), np.int64)
    for j in range(batches):
        for r in range(b):
            o = ((j * b + r) * t) % (n - t - 1)
            x[j, r] = tokens[o:o + t]
            y[j, r] = tokens[o + 1:o + t + 1]
    return {"idx": x, "targets": y}


class EvalTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.compile_bin, cls.run_bin = tools()
        torch.set_num_threads(1)
        cls.tmp = tempfile.TemporaryDirectory(prefix="zinc-e2e-eval-")

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def check(self, name, build, steps, tokens=False, ranks=1):
        """`tokens`: train on a token file (random windows) and evaluate on
        another, whose windows are sequential from its start each time.
        `ranks`: train on that many ZeRO-3 ranks under mpirun, each with its
        share of the batch; rank 0 evaluates batches of one rank's rows."""
        work = os.path.join(self.tmp.name, name)
        os.makedirs(work)
        path = lambda f: os.path.join(work, f)  # noqa: E731
        model, data, eval_data = build()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            models.export_training(copy.deepcopy(model), data, 17, path("model.onnx"))
        if ranks > 1:
            rows = len(next(iter(eval_data.values()))[0]) // ranks
            eval_data = {k: v[:, :rows] for k, v in eval_data.items()}
        if tokens:
            rng = np.random.default_rng(2)
            rng.integers(0, models.NanoGPT.VOCAB, 2000).astype(np.uint16).tofile(
                path("train.bin"))
            eval_tokens = rng.integers(0, models.NanoGPT.VOCAB, 300).astype(np.uint16)
            eval_tokens.tofile(path("eval.bin"))
            eval_data = sequential_windows(eval_tokens, EVAL_STEPS)
            data_flags = ["--data=" + path("train.bin"), "--data-format=tokens-u16",
                          "--data-inputs=idx,targets", "--eval-data=" + path("eval.bin")]
        else:
            st.save_file({k: v[:steps] for k, v in data.items()}, path("train.safetensors"))
            st.save_file({k: v[:EVAL_STEPS] for k, v in eval_data.items()},
                         path("eval.safetensors"))
            data_flags = ["--data=" + path("train.safetensors"),
                          "--eval-data=" + path("eval.safetensors")]
        dims = models.dim_flags({k: v[:, :len(v[0]) // ranks] for k, v in data.items()})
        zero = ["--ranks=%d" % ranks, "--zero-stage=3"] if ranks > 1 else []
        run_tool([self.compile_bin, path("model.onnx"), "-o", path("plan.zplan"),
                  "--optimizer=sgd", "--lr=0.05"] + dims + zero)
        launch = test_zero.mpirun(ranks) if ranks > 1 else []
        out = test_zero.run_ranks(launch + [self.run_bin, path("plan.zplan"), "--backend=cpu",
                        "--steps=%d" % steps] + data_flags + [
                        "--eval-every=%d" % EVAL_EVERY, "--eval-steps=%d" % EVAL_STEPS,
                        "--metrics=" + path("m.jsonl"),
                        "--checkpoint-dir=" + path("ckpt"),
                        "--checkpoint-every=%d" % EVAL_EVERY])
        with open(path("m.jsonl")) as f:
            lines = [json.loads(x) for x in f]
        evals = [x for x in lines if "eval_loss" in x]
        want_steps = [s - 1 for s in range(1, steps + 1)
                      if s % EVAL_EVERY == 0 or s == steps]
        self.assertEqual([x["step"] for x in evals], want_steps)
        self.assertEqual(sorted(evals[0]), ["eval_loss", "step"])
        self.assertIn("step %d: eval loss" % want_steps[0], out.stdout.decode())
        for e in evals:
            m = copy.deepcopy(model)
            saved = st.load_file(os.path.join(path("ckpt"), "step-%d" % (e["step"] + 1),
                                              "model.safetensors"))
            sd = {k: torch.from_numpy(np.array(v)) for k, v in saved.items()}
            result = m.load_state_dict(sd, strict=False)
            self.assertEqual(list(result.unexpected_keys), [])
            m.eval()
            with torch.no_grad():
                losses = [float(m(*models.step_inputs(eval_data, j)))
                          for j in range(EVAL_STEPS)]
            want = sum(losses) / EVAL_STEPS
            self.assertLessEqual(abs(e["eval_loss"] - want), RTOL * abs(want),
                                 "%s after step %d: zinc's eval loss %r, PyTorch's "
                                 "eval-mode %r" % (name, e["step"], e["eval_loss"], want))
            # Training changed the weights: each evaluation sees the current ones.
            if e is not evals[0]:
                self.assertNotEqual(e["eval_loss"], evals[0]["eval_loss"])
        return model, evals

    def test_nanogpt_dropout_off(self):
        self.check("nanogpt", nanogpt_dropout, steps=4)

    def test_nanogpt_token_files(self):
        self.check("nanogpt-tokens", nanogpt_dropout, steps=4, tokens=True)

    def test_nanogpt_two_ranks(self):
        self.check("nanogpt-ranks", nanogpt_dropout, steps=4, ranks=2)

    def test_resnet18_running_statistics(self):
        model, evals = self.check("resnet18", resnet18, steps=2)
        # Batch statistics give another loss: the evaluation normalised with
        # the running ones.
        _, _, eval_data = resnet18()
        m = copy.deepcopy(model)
        saved = st.load_file(os.path.join(self.tmp.name, "resnet18", "ckpt", "step-2",
                                          "model.safetensors"))
        m.load_state_dict({k: torch.from_numpy(np.array(v)) for k, v in saved.items()},
                          strict=False)
        m.train()
        with torch.no_grad():
            batch = sum(float(m(*models.step_inputs(eval_data, j)))
                        for j in range(EVAL_STEPS)) / EVAL_STEPS
        self.assertGreater(abs(evals[-1]["eval_loss"] - batch), 1e-3 * abs(batch))

if __name__ == "__main__":
    unittest.main()
