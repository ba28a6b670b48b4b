"""End-to-end: ZeRO data parallelism over two ranks on the cpu backend.

The GPT example's decoder, exported as users export for training (training
mode, dynamic batch and sequence axes), is trained 4 steps on batches of 4:

  reference: one rank, --dim batch=4 (zinc-run alone);
  ZeRO:      two ranks, --dim batch=2 --ranks=2 (mpirun -np 2 zinc-run),
             each rank taking its half of every batch of the data file,

at ZeRO stages 0, 1, 2 and 3; each stage with every tier on the GPU, with
the optimizer on NVMe and the parameters on the CPU, and with tiling forced
(--tile=2). In fp32 every step's loss (the ranks' mean) matches the
one-rank run's within 1e-5 relative, and the saved weights (gathered from
the ranks' shards) match its weights. The one-rank run itself tracks
PyTorch (test_train_vs_pytorch.py checks that in depth; here the losses).
In fp16 the four stages agree with each other bit for bit (the same
reductions, in f32, whatever shards they are split into).

Collectives merged into buckets (--bucket-bytes) train bit for bit as the
same collectives one tensor at a time do, at stages 0 to 3 (at 1 and 2 the
shares of the gradients and the refreshes of the gathered weights move
down behind their buckets), fp32 and fp16.

Checkpoints: two ranks resume bit for bit (Dropout, ZeRO-3, NVMe states);
a checkpoint of N ranks resumes on M (2->1, 1->2, 2->4, 4->2), its whole
tensors partitioned anew, matching one rank within 1e-5; a checkpoint of
another plan's state (a stage-2 checkpoint of 2 ranks in a one-rank plan) is
refused naming the first state tensor that differs.

The collective counters of --metrics show what each stage moves; a plan
for two ranks refuses one rank and vice versa; a data file holding one
rank's batch is refused with the batch it needs; and when one rank is
killed mid-run, the other stops with a diagnostic instead of hanging.

Run: ZINC_BUILD_DIR=/path/to/build /usr/bin/python3 -m unittest discover -s test/e2e -p test_zero.py
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "test", "lib"))
from harness import LOSS_RTOL, run_tool, tools  # noqa: E402
import models  # noqa: E402
import safetensors_io  # noqa: E402

STEPS = 4
BATCH = 4
RANKS = 2
ZERO_RTOL = 1e-5
WEIGHT_RTOL = 1e-3
TIMEOUT = 300


def mpirun(ranks=RANKS):
    """mpirun with what CI allows: more ranks than cores, and root."""
    exe = shutil.which("mpirun")
    if not exe:
        raise unittest.SkipTest("mpirun is not installed (openmpi-bin)")
    argv = [exe, "--oversubscribe"]
    if os.geteuid() == 0:
        argv.append("--allow-run-as-root")
    return argv + ["-np", str(ranks)]


def mpi_env():
    """The environment of mpirun and its ranks. Under AddressSanitizer
    (make test-sanitize) leak detection is off for them: Open MPI keeps
    allocations until exit in components it has unloaded by then, which
    LeakSanitizer can neither attribute nor suppress. Its other checks stay;
    one-rank runs, which never start MPI, keep leak detection."""
    env = dict(os.environ)
    if "ASAN_OPTIONS" in env:
        env["ASAN_OPTIONS"] += ":detect_leaks=0"
    return env


def run_ranks(argv):
    proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          timeout=TIMEOUT, env=mpi_env())
    if proc.returncode != 0:
        raise AssertionError("%s exited %d:\n%s%s" % (
            " ".join(argv), proc.returncode, proc.stdout.decode()[-2000:],
            proc.stderr.decode()[-4000:]))
    return proc


def read_metrics(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


class ZeroTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.zinc_compile, cls.zinc_run = tools()
        cls.mpirun = mpirun()
        cls.tmp = tempfile.mkdtemp(prefix="zinc-zero-")
        torch.manual_seed(0)
        model, data = models.build("gpt")
        cls.model = model
        cls.data = {k: np.ascontiguousarray(v[:STEPS]) for k, v in data.items()}
        cls.onnx = cls.path("gpt.onnx")
        models.export_training(model, cls.data, 17, cls.onnx)
        cls.datafile = cls.path("data.safetensors")
        safetensors_io.save_file(cls.data, cls.datafile)
        cls.reference = {}

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    @classmethod
    def path(cls, name):
        return os.path.join(cls.tmp, name)

    def compile_plan(self, name, batch, *flags):
        plan = self.path(name + ".zplan")
        run_tool([self.zinc_compile, self.onnx, "--dim", "batch=%d" % batch, "--dim", "seq=32",
                  "-o", plan, "--report=" + self.path(name + ".json")] + list(flags))
        with open(self.path(name + ".json")) as f:
            return plan, json.load(f)

    def train(self, name, plan, ranks, *flags, steps=STEPS):
        """(per-step metrics, saved weights) of `steps` steps of `plan`."""
        nvme = self.path(name + ".nvme")
        os.makedirs(nvme, exist_ok=True)
        argv = [self.zinc_run, plan, "--steps=%d" % steps, "--data=" + self.datafile,
                "--nvme-dir=" + nvme, "--metrics=" + self.path(name + ".jsonl"),
                "--save-weights=" + self.path(name + ".safetensors"),
                "--collective-timeout=60"] + list(flags)
        if ranks > 1:
            run_ranks(mpirun(ranks) + argv)
        else:
            run_tool(argv)
        return (read_metrics(self.path(name + ".jsonl")),
                safetensors_io.load_file(self.path(name + ".safetensors")))

    def one_rank(self, precision):
        if precision not in self.reference:
            plan, _ = self.compile_plan("ref-" + precision, BATCH,
                                        "--precision=" + precision)
            self.reference[precision] = self.train("ref-" + precision, plan, 1)
        return self.reference[precision]

    def assert_same_training(self, want, got, rtol, what):
        want_metrics, want_weights = want
        got_metrics, got_weights = got
        self.assertEqual([m["step"] for m in got_metrics], list(range(STEPS)), what)
        for w, g in zip(want_metrics, got_metrics):
            self.assertLessEqual(abs(g["loss"] - w["loss"]), rtol * abs(w["loss"]),
                                 "%s: step %d loss %r, one rank %r"
                                 % (what, w["step"], g["loss"], w["loss"]))
        # The weights gathered from the ranks' shards, whole and in place: a
        # shard misplaced would be off by the weights' own size. (Not to
        # rtol: Adam turns the rounding noise of a gradient that is zero in
        # exact arithmetic, such as attention's key bias, into whole steps.)
        self.assertEqual(sorted(got_weights), sorted(want_weights), what)
        for name, w in want_weights.items():
            g = got_weights[name]
            self.assertEqual(g.shape, w.shape, "%s: %s" % (what, name))
            scale = max(float(np.abs(w).max()), 1e-3)
            self.assertLessEqual(float(np.abs(g - w).max()), WEIGHT_RTOL * scale,
                                 "%s: weight %s" % (what, name))

    def test_one_rank_tracks_pytorch(self):
        metrics, _ = self.one_rank("fp32")
        want = models.train_reference(self.model, self.data, steps=STEPS)
        for step, (w, m) in enumerate(zip(want, metrics)):
            self.assertLessEqual(abs(m["loss"] - w), LOSS_RTOL * abs(w), "step %d" % step)

    def check_stages(self, extra, label):
        want = self.one_rank("fp32")
        for stage in range(4):
            with self.subTest(stage=stage, config=label):
                name = "zero%d-%s" % (stage, label)
                plan, report = self.compile_plan(name, BATCH // RANKS, "--ranks=%d" % RANKS,
                                                 "--zero-stage=%d" % stage, *extra)
                self.assertEqual(report["config"]["ranks"], RANKS)
                self.assertEqual(report["config"]["zero_stage"], stage)
                got = self.train(name, plan, RANKS)
                self.assert_same_training(want, got, ZERO_RTOL, name)
                moved = got[0][-1]["bytes"]
                if stage == 0:
                    self.assertGreater(moved["allreduce"], 0, name)
                    self.assertEqual(moved["allgather"] + moved["reduce_scatter"], 0, name)
                if stage >= 1:
                    self.assertGreater(moved["allgather"], 0, name)
                if stage >= 2:
                    self.assertGreater(moved["reduce_scatter"], 0, name)

    def test_stages_on_the_gpu_tier(self):
        self.check_stages([], "gpu")

    def test_stages_with_nvme_optimizer_and_cpu_parameters(self):
        self.check_stages(["--offload-optimizer=nvme", "--offload-params=cpu"], "offload")

    def test_stages_with_tiling_forced(self):
        self.check_stages(["--tile=2"], "tiled")

    def test_fp16_stages_agree(self):
        runs = []
        for stage in range(4):
            name = "fp16-zero%d" % stage
            plan, _ = self.compile_plan(name, BATCH // RANKS, "--ranks=%d" % RANKS,
                                        "--zero-stage=%d" % stage, "--precision=fp16")
            runs.append(self.train(name, plan, RANKS))
        for stage in range(1, 4):
            self.assert_same_training(runs[0], runs[stage], 1e-7, "fp16 stage %d" % stage)

    def test_buckets_train_as_single_collectives_do(self):
        # A bucket is its collectives issued as one group: the same
        # reductions of the same bytes, so the same training bit for bit.
        # fp32 takes MPI's grouped path (requests in flight together), fp16's
        # sums go through the f32 scratch one tensor after another.
        dump = os.path.join(os.path.dirname(self.zinc_compile), "zinc-dump")
        for stage, precision, kinds in ((0, "fp32", ["AllReduce"]),
                                        (1, "fp32", ["AllReduce", "AllGather"]),
                                        (2, "fp32", ["ReduceScatter", "AllGather"]),
                                        (3, "fp32", ["AllGather", "ReduceScatter"]),
                                        (3, "fp16", ["AllGather", "ReduceScatter"])):
            runs = []
            for bucket in ("0", "16KiB"):
                name = "buckets-zero%d-%s-%s" % (stage, precision, bucket)
                with self.subTest(name=name):
                    plan, report = self.compile_plan(
                        name, BATCH // RANKS, "--ranks=%d" % RANKS, "--zero-stage=%d" % stage,
                        "--precision=" + precision, "--bucket-bytes=" + bucket)
                    text = subprocess.run([dump, plan], capture_output=True, text=True,
                                          check=True).stdout
                    for kind in kinds:
                        self.assertEqual("bucket/" + kind in text, bucket != "0",
                                         "%s: %s buckets" % (name, kind))
                    runs.append(self.train(name, plan, RANKS))
            self.assert_bit_identical(runs[0], runs[1], "stage %d %s" % (stage, precision))
            # Each collective's bytes are counted once, bucketed or not.
            self.assertEqual(runs[0][0][-1]["bytes"], runs[1][0][-1]["bytes"])

    def test_dropout_masks_are_the_one_rank_masks(self):
        # Each rank numbers its Dropout elements from rank x the tensor's
        # size: with the batch outermost the two ranks draw, between them,
        # the one-rank run's mask of the whole batch.
        torch.manual_seed(0)
        model = models.GPT(dropout=0.2).eval()
        onnx = self.path("gpt-dropout.onnx")
        models.export_training(model, self.data, 17, onnx)
        runs = []
        for ranks in (1, RANKS):
            name = "dropout-%d" % ranks
            plan = self.path(name + ".zplan")
            run_tool([self.zinc_compile, onnx, "--dim", "batch=%d" % (BATCH // ranks),
                      "--dim", "seq=32", "-o", plan, "--ranks=%d" % ranks,
                      "--zero-stage=%d" % (2 if ranks > 1 else 0)])
            runs.append(self.train(name, plan, ranks))
        self.assert_same_training(runs[0], runs[1], ZERO_RTOL, "dropout")

    def resume_run(self, name, first, second):
        """Trains 2 steps of plan `first` = (plan, ranks) with a checkpoint
        after them, then resumes plan `second` from it to STEPS: the
        metrics of both parts and the final weights."""
        ckpt = self.path(name + ".ckpt")
        head, _ = self.train(name + "-head", *first, "--checkpoint-dir=" + ckpt, steps=2)
        tail, weights = self.train(name + "-tail", *second, "--resume=" + ckpt)
        return head + tail, weights

    def assert_bit_identical(self, want, got, what):
        self.assertEqual([m["loss"] for m in got[0]], [m["loss"] for m in want[0]], what)
        self.assertEqual(sorted(got[1]), sorted(want[1]), what)
        for name, w in want[1].items():
            self.assertTrue(np.array_equal(got[1][name], w), "%s: weight %s" % (what, name))

    def test_two_rank_resume_is_exact(self):
        # Training-mode Dropout, ZeRO-3, AdamW states on NVMe and parameters
        # on the CPU: 2 steps, a checkpoint, and 2 more from it give the 4
        # straight steps' losses and weights bit for bit.
        torch.manual_seed(0)
        onnx = self.path("gpt-dropout-resume.onnx")
        models.export_training(models.GPT(dropout=0.1).eval(), self.data, 17, onnx)
        plan = self.path("resume-exact.zplan")
        run_tool([self.zinc_compile, onnx, "--dim", "batch=%d" % (BATCH // RANKS), "--dim",
                  "seq=32", "-o", plan, "--ranks=%d" % RANKS, "--zero-stage=3",
                  "--offload-optimizer=nvme", "--offload-params=cpu"])
        straight = self.train("resume-straight", plan, RANKS)
        resumed = self.resume_run("resume-exact", (plan, RANKS), (plan, RANKS))
        self.assertEqual([m["step"] for m in resumed[0]], list(range(STEPS)))
        self.assert_bit_identical(straight, resumed, "2 ranks, resumed")
        # The checkpoint holds whole tensors, whatever the rank count.
        ckpt = self.path("resume-exact.ckpt/step-2")
        with open(os.path.join(ckpt, "manifest.json")) as f:
            manifest = json.load(f)
        self.assertEqual(manifest["ranks"], RANKS)
        model = safetensors_io.load_file(os.path.join(ckpt, "model.safetensors"))
        self.assertEqual(sorted(model), sorted(straight[1]))
        for name, w in straight[1].items():
            self.assertEqual(model[name].shape, w.shape, name)

    def test_checkpoints_are_partitioned_anew_for_another_rank_count(self):
        # A checkpoint of N ranks resumes on M when the plans differ only in
        # the rank count: each rank takes its share of the whole tensors.
        # The result matches one rank training straight through, within
        # the rounding of the ranks' reductions.
        want = self.one_rank("fp32")
        plans = {}
        for ranks in (1, 2, 4):
            for stage in (2, 3):
                plans[ranks, stage], _ = self.compile_plan(
                    "repartition-%d-%d" % (ranks, stage), BATCH // ranks,
                    "--ranks=%d" % ranks, "--zero-stage=%d" % stage,
                    "--offload-optimizer=nvme")
        for (n, m, stage) in ((2, 1, 3), (1, 2, 3), (2, 4, 2), (4, 2, 3)):
            with self.subTest(ranks=(n, m), stage=stage):
                name = "repartition-%dto%d-zero%d" % (n, m, stage)
                got = self.resume_run(name, (plans[n, stage], n), (plans[m, stage], m))
                self.assert_same_training(want, got, ZERO_RTOL, name)

    def test_resume_refuses_a_plan_without_its_state(self):
        # With several ranks, stages 1 and 2 in fp32 keep sharded master
        # weights (w.master) that a one-rank plan (which never partitions)
        # has not: the resume names the first difference.
        plan2, _ = self.compile_plan("stage-mismatch-2", BATCH // RANKS, "--ranks=%d" % RANKS,
                                     "--zero-stage=2")
        ckpt = self.path("stage-mismatch.ckpt")
        self.train("stage-mismatch-head", plan2, RANKS, "--checkpoint-dir=" + ckpt, steps=1)
        plan1, _ = self.compile_plan("stage-mismatch-1", BATCH)
        proc = subprocess.run([self.zinc_run, plan1, "--data=" + self.datafile,
                               "--resume=" + ckpt], capture_output=True, text=True,
                              timeout=TIMEOUT)
        self.assertEqual(proc.returncode, 1, proc.stderr)
        self.assertRegex(proc.stderr, r"zinc-run: error: .*step-1: --resume: the checkpoint is "
                                      r"of another plan: its state tensor \d+ is '[^']+' "
                                      r"f32\[[0-9,]+\], this plan's is ")

    def test_rank_count_must_match_the_plan(self):
        two, _ = self.compile_plan("two-ranks", BATCH // RANKS, "--ranks=%d" % RANKS)
        proc = subprocess.run([self.zinc_run, two], capture_output=True, text=True, timeout=TIMEOUT)
        self.assertEqual(proc.returncode, 1)
        self.assertIn("zinc-run: error: the plan was compiled for 2 ranks (--ranks=2): "
                      "start it with mpirun -np 2", proc.stderr)
        one, _ = self.compile_plan("one-rank", BATCH)
        proc = subprocess.run(self.mpirun + [self.zinc_run, one], capture_output=True, text=True,
                              timeout=TIMEOUT, env=mpi_env())
        self.assertNotEqual(proc.returncode, 0)
        self.assertIn("zinc-run: error: the plan was compiled for 1 rank (--ranks=1) but 2 "
                      "were started", proc.stderr)

    def test_data_must_hold_every_ranks_batch(self):
        plan, _ = self.compile_plan("batch-check", BATCH // RANKS, "--ranks=%d" % RANKS)
        half = self.path("half.safetensors")
        safetensors_io.save_file({k: np.ascontiguousarray(v[:, :BATCH // RANKS])
                                  for k, v in self.data.items()}, half)
        proc = subprocess.run(self.mpirun + [self.zinc_run, plan, "--data=" + half],
                              capture_output=True, text=True, timeout=TIMEOUT, env=mpi_env())
        self.assertNotEqual(proc.returncode, 0)
        self.assertIn("expected i64[steps,4,32] (the batch of all 2 ranks: each takes 2)",
                      proc.stderr)

    def test_compile_flag_errors(self):
        for flags, message in ((["--ranks=0"], "--ranks must be between 1 and"),
                               (["--zero-stage=4"], "--zero-stage must be 0, 1, 2 or 3, not 4")):
            proc = subprocess.run([self.zinc_compile, self.onnx, "-o", self.path("bad.zplan"),
                                   "--dim", "batch=2", "--dim", "seq=32"] + flags,
                                  capture_output=True, text=True, timeout=TIMEOUT)
            self.assertEqual(proc.returncode, 1, flags)
            self.assertIn("zinc-compile: error: " + message, proc.stderr)
            self.assertFalse(os.path.exists(self.path("bad.zplan")))

    def test_a_killed_rank_stops_the_other(self):
        plan, _ = self.compile_plan("kill", BATCH // RANKS, "--ranks=%d" % RANKS,
                                    "--zero-stage=3")
        timeout = 10
        proc = subprocess.Popen(self.mpirun + [self.zinc_run, plan, "--steps=100000000",
                                               "--collective-timeout=%d" % timeout],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=mpi_env())
        try:
            # Both ranks are stepping once rank 0 printed a few steps.
            for _ in range(3):
                line = proc.stdout.readline()
                self.assertTrue(line.startswith("step "), line)
            # The ranks, not mpirun (whose command line names them too).
            ranks = subprocess.run(["pgrep", "-f", "^" + self.zinc_run + " " + plan],
                                   capture_output=True, text=True).stdout.split()
            self.assertEqual(len(ranks), RANKS, ranks)
            os.kill(int(ranks[-1]), signal.SIGKILL)
            started = time.monotonic()
            _, err = proc.communicate(timeout=timeout + 60)
            waited = time.monotonic() - started
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
        self.assertNotEqual(proc.returncode, 0)
        self.assertLess(waited, timeout + 30)
        # The survivor says why it stops: its collective timed out, or the
        # launcher stopped it after noticing the death.
        self.assertRegex(err, r"zinc-run: error: rank \d: (.* timed out after|stopped by "
                              r"the launcher)")


if __name__ == "__main__":
    unittest.main()
