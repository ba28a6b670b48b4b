"""End-to-end: the delayed parameter update (zinc-compile --dpu).

With --dpu the host's optimizer update of step i runs during the forward and
backward of step i+1 and applies step i's gradients there (ZeRO-Offload's
DPU): step 0 updates nothing, and the weights a forward reads are one update
behind. Two kinds of check:

1. Exactly what DPU computes. PyTorch trains the same export with the same
   delayed schedule (models.train_reference(delayed=True): the update of
   step i applies the gradients of step i-1), and zinc must match it with
   the tolerances of every other PyTorch comparison (harness.py): nanoGPT
   exported as users export it (training mode, dynamic batch and sequence
   axes) with AdamW states on the CPU, and the MLP (exported the same way)
   with momentum SGD whose states live on NVMe.

2. That DPU still trains like the ordinary update. The bundled example
   (examples/gpt, 64 steps, lr 3e-3) is trained with and without --dpu:
   with `make run`'s placement (optimizer on NVMe, parameters on the CPU),
   and in fp16 with the optimizer on the CPU and a loss scale so high that
   the first steps overflow and are skipped. Every step's
   loss with DPU must be within 10% of the loss without it, and the mean of
   the last 16 steps within 5%. Why these bounds: DPU applies the same
   sequence of updates one step later, each computed from weights one update
   older, so its curve trails the ordinary one by about one step's progress.
   On this example one step moves the loss by up to a few percent (measured:
   at most 6.2% apart at any step, 1.4% on average, the last 16 steps' means
   2.3% apart); a DPU that lost gradients, applied them twice or read
   half-updated weights drifts far beyond that within 64 steps.

Run: ZINC_BUILD_DIR=/path/to/build /usr/bin/python3 -m unittest discover -s test/e2e -p test_dpu.py
"""

import json
import math
import os
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import models  # noqa: E402
from harness import ADAMW, SGD, TrainingComparison, run_tool, tools  # noqa: E402

STEP_RTOL = 0.10
TAIL_RTOL = 0.05
TAIL = 16


class DelayedUpdateVsPyTorchTest(TrainingComparison, unittest.TestCase):
    def test_nanogpt_training_export_adamw_on_cpu(self):
        model, data = models.build("nanogpt")
        self.check("nanogpt", 17, ADAMW, build=lambda: (model, data),
                   export=models.export_training,
                   compile_flags=models.dim_flags(data) + [
                       "--dpu", "--offload-optimizer=cpu", "--offload-params=none"],
                   reference_kw={"delayed": True})

    def test_mlp_sgd_momentum_on_nvme(self):
        model, data = models.build("mlp")
        nvme = tempfile.mkdtemp(prefix="nvme-", dir=self.root)
        self.check("mlp", 17, SGD, build=lambda: (model, data),
                   export=models.export_training,
                   compile_flags=models.dim_flags(data) + [
                       "--dpu", "--offload-optimizer=nvme", "--offload-params=cpu"],
                   run_flags=["--nvme-dir=" + nvme], reference_kw={"delayed": True})


class DelayedUpdateTracksTest(unittest.TestCase):
    def train_example(self, tmp, name, flags):
        """Losses of 64 steps of the bundled example compiled with `flags`."""
        compile_bin, run_bin = tools()
        gpt = os.path.join(ROOT, "examples", "gpt")
        plan = os.path.join(tmp, name + ".zplan")
        metrics = os.path.join(tmp, name + ".jsonl")
        nvme = os.path.join(tmp, name + "-nvme")
        os.makedirs(nvme)
        run_tool([compile_bin, os.path.join(gpt, "gpt.onnx"), "-o", plan, "--mode=train",
                  "--optimizer=adamw", "--lr=3e-3"] + flags)
        run_tool([run_bin, plan, "--backend=cpu", "--steps=64",
                  "--data=" + os.path.join(gpt, "data.safetensors"),
                  "--nvme-dir=" + nvme, "--metrics=" + metrics])
        with open(metrics) as f:
            return [json.loads(line) for line in f if line.strip()]

    def check_tracks(self, flags):
        with tempfile.TemporaryDirectory(prefix="zinc-e2e-dpu-") as tmp:
            ordinary = [m["loss"] for m in self.train_example(tmp, "ordinary", flags)]
            metrics = self.train_example(tmp, "dpu", flags + ["--dpu"])
        dpu = [m["loss"] for m in metrics]
        self.assertEqual(len(ordinary), 64)
        self.assertEqual(len(dpu), 64)
        self.assertTrue(all(math.isfinite(x) for x in dpu), dpu)
        # Step 0 runs the same weights either way.
        self.assertEqual(dpu[0], ordinary[0])
        apart = [abs(d - o) / o for d, o in zip(dpu, ordinary)]
        worst = max(range(64), key=lambda i: apart[i])
        print("\n%s: DPU vs ordinary at most %.1f%% apart (step %d), %.1f%% on average"
              % (" ".join(flags), 100 * apart[worst], worst, 100 * sum(apart) / 64),
              file=sys.stderr)
        self.assertLessEqual(apart[worst], STEP_RTOL,
                             "step %d: DPU %.4f, ordinary %.4f" % (worst, dpu[worst],
                                                                  ordinary[worst]))
        tail_dpu, tail_ordinary = sum(dpu[-TAIL:]) / TAIL, sum(ordinary[-TAIL:]) / TAIL
        self.assertLessEqual(abs(tail_dpu - tail_ordinary) / tail_ordinary, TAIL_RTOL)
        # Both trained: the last steps' losses are well below the first's.
        self.assertLess(tail_dpu, 0.7 * dpu[0])
        return ordinary, dpu, metrics

    def test_bundled_example_tracks_the_ordinary_update(self):
        ordinary, dpu, _ = self.check_tracks(["--offload-optimizer=nvme",
                                              "--offload-params=cpu"])
        # Step 1 differs: DPU has not applied step 0's gradients yet.
        self.assertNotEqual(dpu[1], ordinary[1])

    def test_fp16_overflowing_steps_are_skipped_a_step_late(self):
        """fp16 loss scaling starting far too high: the first steps'
        gradients overflow and their updates are skipped, by DPU too, which
        judges each gradient with the overflow flag and scale of the step
        that made it (a flag of the wrong step would apply infinities, or
        skip good gradients, and the curves would part)."""
        ordinary, dpu, metrics = self.check_tracks(
            ["--precision=fp16", "--initial-loss-scale=1e12", "--offload-optimizer=cpu"])
        skipped = [m["skipped"] for m in metrics]
        overflowing = skipped.index(False)
        self.assertGreater(overflowing, 4, "the scale did not overflow: %s" % skipped)
        # While every update is skipped, both runs keep the initial weights;
        # the first finite gradient reaches the ordinary run's next step, and
        # DPU's a step later.
        self.assertEqual(dpu[:overflowing + 1], ordinary[:overflowing + 1])
        self.assertNotEqual(dpu[overflowing + 1], ordinary[overflowing + 1])

    def test_resume_carries_the_delayed_gradients(self):
        """A checkpoint after step 4 holds the gradients step 5 applies:
        resuming from it gives the uninterrupted run's losses, bit for bit."""
        compile_bin, run_bin = tools()
        gpt = os.path.join(ROOT, "examples", "gpt")
        with tempfile.TemporaryDirectory(prefix="zinc-e2e-dpu-") as tmp:
            plan = os.path.join(tmp, "dpu.zplan")
            run_tool([compile_bin, os.path.join(gpt, "gpt.onnx"), "-o", plan, "--mode=train",
                      "--dpu", "--offload-optimizer=cpu"])
            def train(steps, *flags):
                metrics = os.path.join(tmp, "m.jsonl")
                run_tool([run_bin, plan, "--steps=%d" % steps, "--metrics=" + metrics,
                          "--data=" + os.path.join(gpt, "data.safetensors")] + list(flags))
                with open(metrics) as f:
                    return [json.loads(line)["loss"] for line in f if line.strip()]
            whole = train(8)
            checkpoints = os.path.join(tmp, "checkpoints")
            first = train(4, "--checkpoint-dir=" + checkpoints)
            rest = train(8, "--resume=" + checkpoints)
        self.assertEqual(first + rest, whole)


if __name__ == "__main__":
    unittest.main()
