"""End-to-end: learning-rate schedules against transformers' schedulers.

zinc-compile --lr-schedule=constant|linear|cosine --warmup-steps=W
--total-steps=T makes update k use --lr times the factor of transformers'
get_constant_schedule_with_warmup / get_linear_schedule_with_warmup /
get_cosine_schedule_with_warmup (num_cycles 0.5). Each case trains a model of
models.py for 8 steps with zinc and with PyTorch, whose loop steps a LambdaLR
holding transformers' factors after each optimizer step (as Trainer does),
and checks the losses, weights and updates as test_train_vs_pytorch.py does,
and every metrics line's "lr" against the rate PyTorch's optimizer used.
A run resumed from a checkpoint at step 4 continues the schedule: its
losses and rates are those of the run that never stopped. Under fp16 loss
scaling, steps skipped for overflow do not advance it.

The factors come from transformers itself, run in the test virtualenv
(build/test-venv, scripts/setup-test-venv.sh) when the python running the
test has no transformers; without either, from `reference_factor`, this
file's transcription of transformers' formulas, which the test checks
against transformers whenever transformers is there.
"""

import json
import math
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "test", "lib"))
import models  # noqa: E402
from harness import ADAMW, SGD, LOSS_RTOL, TrainingComparison, run_tool  # noqa: E402

SCHEDULERS = {"constant": "get_constant_schedule_with_warmup",
              "linear": "get_linear_schedule_with_warmup",
              "cosine": "get_cosine_schedule_with_warmup"}

_TRANSFORMERS_SCRIPT = r"""
import json, sys, torch, transformers
kind, warmup, total, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
p = torch.nn.Parameter(torch.zeros(1))
opt = torch.optim.SGD([p], lr=1.0)
make = getattr(transformers, sys.argv[5])
s = make(opt, warmup) if kind == "constant" else make(opt, warmup, total)
out = []
for _ in range(n):
    out.append(opt.param_groups[0]["lr"])
    opt.step()
    s.step()
print(json.dumps(out))
"""


def reference_factor(kind, warmup, total, k):
    """transformers 4.30's lr_lambda of each schedule (num_cycles 0.5)."""
    if k < warmup:
        return float(k) / float(max(1, warmup))
    if kind == "constant":
        return 1.0
    if kind == "linear":
        return max(0.0, float(total - k) / float(max(1, total - warmup)))
    progress = float(k - warmup) / float(max(1, total - warmup))
    return max(0.0, 0.5 * (1.0 + math.cos(math.pi * float(0.5) * 2.0 * progress)))


def transformers_factors(kind, warmup, total, n):
    """Factors of updates 0..n-1 from transformers, or None without it."""
    argv = [kind, str(warmup), str(total), str(n), SCHEDULERS[kind]]
    try:
        import transformers  # noqa: F401
        python = sys.executable
    except ImportError:
        python = os.path.join(os.environ.get("ZINC_TEST_VENV", os.path.join(
            ROOT, "build", "test-venv")), "bin", "python")
        if not os.access(python, os.X_OK):
            return None
    proc = subprocess.run([python, "-c", _TRANSFORMERS_SCRIPT] + argv,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=300)
    if proc.returncode != 0:
        return None
    return json.loads(proc.stdout.decode().strip().splitlines()[-1])


def factors(test, kind, warmup, total, n):
    mine = [reference_factor(kind, warmup, total, k) for k in range(n)]
    theirs = transformers_factors(kind, warmup, total, n)
    if theirs is not None:
        test.assertEqual(len(theirs), n)
        for k, (a, b) in enumerate(zip(mine, theirs)):
            test.assertAlmostEqual(a, b, delta=1e-15, msg="update %d" % k)
        return theirs
    return mine


class LrScheduleTest(TrainingComparison, unittest.TestCase):
    def schedule_case(self, name, optimizer, kind, warmup, total, lr, delayed=False,
                      **kw):
        """`delayed`: --dpu, whose step 0 makes no update (its rate is
        reported as update 0's, as is step 1's, the first update)."""
        opt_name, torch_kw, zinc_flags = optimizer
        # LambdaLR asks for the factor after the last update too.
        f = factors(self, kind, warmup, total, models.STEPS + 1)
        flags = ["--lr=%r" % lr, "--lr-schedule=" + kind, "--warmup-steps=%d" % warmup]
        if kind != "constant":
            flags.append("--total-steps=%d" % total)
        # zinc's flags for the optimizer come first; the schedule's --lr last.
        optimizer = (opt_name, dict(torch_kw, lr=lr),
                     [x for x in zinc_flags if not x.startswith("--lr=")])
        compile_flags = flags + list(kw.pop("compile_flags", []))
        self.check(name, 17, optimizer, compile_flags=compile_flags,
                   reference_kw={"lr_factors": f, "delayed": delayed}, **kw)
        with open(os.path.join(self.root, "%s-opset17-%s" % (name, opt_name),
                               "metrics.jsonl")) as fh:
            got = [json.loads(line)["lr"] for line in fh if line.strip()]
        want = [lr * x for x in ([f[0]] if delayed else []) + f][:models.STEPS]
        self.assertEqual(len(got), len(want))
        for k, (g, w) in enumerate(zip(got, want)):
            self.assertAlmostEqual(g, w, delta=1e-12 * max(1.0, abs(w)),
                                   msg="metrics lr of step %d: %s vs %s" % (k, got, want))
        return f

    def test_mlp_adamw_cosine_with_warmup(self):
        """AdamW, cosine decay over 7 updates after 2 of warmup (the first
        update at rate 0, the last past the decay's end)."""
        self.schedule_case("mlp", ADAMW, "cosine", 2, 7, 0.01)

    def test_gpt_adamw_linear_with_warmup(self):
        """The GPT decoder, AdamW, linear decay to 0 at update 6 (updates 6
        and 7 at rate 0: the weights stay)."""
        self.schedule_case("gpt", ADAMW, "linear", 3, 6, 0.003)

    def test_mlp_sgd_constant_with_warmup(self):
        """SGD with momentum and Nesterov, 3 updates of warmup, then constant."""
        self.schedule_case("mlp", SGD, "constant", 3, 0, 0.05)

    def test_mlp_adamw_cosine_delayed_update_on_nvme(self):
        """--dpu with the optimizer on NVMe (the host's update, a step late):
        the first update, step 1's, is update 0 of the schedule."""
        model, data = models.build("mlp")
        nvme = tempfile.mkdtemp(prefix="nvme-", dir=self.root)
        self.schedule_case("mlp", ADAMW, "cosine", 2, 6, 0.01, delayed=True,
                           build=lambda: (model, data), export=models.export_training,
                           compile_flags=models.dim_flags(data) + [
                               "--dpu", "--offload-optimizer=nvme", "--offload-params=cpu"],
                           run_flags=["--nvme-dir=" + nvme])

    def test_resume_continues_the_schedule(self):
        """A run stopped after 4 steps (a checkpoint) and resumed to 8 has the
        losses and rates of one that ran 8 steps straight."""
        model, data = models.build("mlp")
        work = os.path.join(self.root, "resume")
        os.makedirs(work, exist_ok=True)
        path = lambda f: os.path.join(work, f)  # noqa: E731
        models.export(model, data, 17, path("model.onnx"))
        import safetensors_io as st
        st.save_file(data, path("data.safetensors"))
        run_tool([self.compile_bin, path("model.onnx"), "-o", path("model.zplan"),
                  "--lr=0.01", "--lr-schedule=cosine", "--warmup-steps=2",
                  "--total-steps=8"])
        common = [self.run_bin, path("model.zplan"), "--backend=cpu",
                  "--data=" + path("data.safetensors")]
        run_tool(common + ["--steps=8", "--metrics=" + path("straight.jsonl")])
        run_tool(common + ["--steps=4", "--checkpoint-dir=" + path("ckpt")])
        run_tool(common + ["--steps=8", "--resume=" + path("ckpt"),
                           "--metrics=" + path("resumed.jsonl")])

        def read(name):
            with open(path(name)) as fh:
                return [json.loads(line) for line in fh if line.strip()]
        straight, resumed = read("straight.jsonl"), read("resumed.jsonl")
        self.assertEqual([m["step"] for m in resumed], [4, 5, 6, 7])
        f = factors(self, "cosine", 2, 8, 8)
        self.assertEqual([m["lr"] for m in straight], [0.01 * x for x in f])
        for m in resumed:
            want = straight[m["step"]]
            self.assertEqual(m["lr"], want["lr"], "step %d" % m["step"])
            self.assertLessEqual(abs(m["loss"] - want["loss"]),
                                 LOSS_RTOL * abs(want["loss"]), "step %d" % m["step"])


class LrScheduleFp16Test(unittest.TestCase):
    """Under fp16 loss scaling, a step skipped for overflow does not advance
    the schedule (Trainer steps its scheduler only after an optimizer step
    that ran): with a scale that overflows the first k steps, step k is
    update 0 and uses the full rate of a linear decay, not the rate of
    update k. Uses test_mixed_precision.py's MLP."""

    @classmethod
    def setUpClass(cls):
        import numpy as np
        import safetensors_io as st
        import test_mixed_precision as mp
        cls.mp = mp
        mp.Tools.find()
        cls.tmp = tempfile.TemporaryDirectory(prefix="zinc-e2e-lr-fp16-")
        rng = np.random.default_rng(7)
        text, cls.initial = mp.mlp_text(rng)
        cls.model = os.path.join(cls.tmp.name, "mlp.onnxtxt")
        with open(cls.model, "w") as f:
            f.write(text)
        cls.data = os.path.join(cls.tmp.name, "data.safetensors")
        st.save_file(mp.mlp_data(rng), cls.data)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_skipped_steps_do_not_advance_the_schedule(self):
        import numpy as np
        t = self.mp.Trainer(self, self.tmp.name, self.model, self.data)
        lr = 1e-3
        flags = ["--precision=fp16", "--initial-loss-scale=16777216", "--optimizer=adam",
                 "--lr=%r" % lr, "--lr-schedule=linear", "--total-steps=4"]
        lines, _, _ = t.train("skips", flags, steps=self.mp.STEPS)
        skipped = [line["skipped"] for line in lines]
        k = skipped.index(False)
        self.assertGreaterEqual(k, 2, skipped)
        self.assertTrue(all(skipped[:k]) and not any(skipped[k:]), skipped)
        want = [lr] * (k + 1) + [lr * max(0.0, (4 - j) / 4) for j in range(1, len(lines) - k)]
        got = [line["lr"] for line in lines]
        self.assertEqual(len(got), len(want))
        for i, (g, w) in enumerate(zip(got, want)):
            self.assertAlmostEqual(g, w, delta=1e-15, msg="step %d: %s vs %s" % (i, got, want))
        # The first applied step is Adam's first at the full rate: each
        # element moves by lr wherever |g| >> eps (update k's rate would be
        # at most half of it).
        _, weights, _ = t.train("skips-first-applied", flags, steps=k + 1)
        moved = np.concatenate([np.abs(weights[n].astype(np.float64) - w).ravel()
                                for n, w in self.initial.items()]) / lr
        self.assertAlmostEqual(float(np.median(moved)), 1.0, delta=1e-3)


if __name__ == "__main__":
    unittest.main()
