"""End-to-end: zinc-run --data=DIR, a folder of safetensors shards (issue 34,
item 4).

The MLP trains on 100 shards of 1 to 3 steps each, named so that the order
of their names is not the order they were written in, beside a README that
is left out; its losses are bit for bit those of one file holding every
step in that order, also past the end (step i feeds step i mod the total, as
a file does). A run stopped at a checkpoint in the middle of a shard and
resumed gives the same losses, and so do 2 ranks under mpirun (each step of
a shard holding both ranks' rows). Resident memory holds at most two shards: 12
shards carrying 8 MB each (a tensor no graph input reads) peak within 2.5
shards of one such shard. Refusals name the shard in one line: another
tensor name, dtype or row shape than the first shard's, a graph input
missing, inputs of one shard with different step counts, a folder without
shards.
"""

import json
import os
import subprocess
import sys
import tempfile
import unittest

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "test", "lib"))
import safetensors_io as st  # noqa: E402
from harness import run_tool, tools  # noqa: E402

SHARDS = 100
IN, CLASSES, BATCH = 32, 10, 16


def make_data(steps, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((steps, BATCH, IN)).astype(np.float32)
    y = rng.integers(0, CLASSES, size=(steps, BATCH)).astype(np.int64)
    return {"x": x, "targets": y}


def losses(path):
    with open(path) as f:
        return {m["step"]: m["loss"] for m in map(json.loads, f) if "loss" in m}


class ShardDataTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.compile_bin, cls.run_bin = tools()
        cls.tmp = tempfile.TemporaryDirectory(prefix="zinc-e2e-shards-")
        cls.root = cls.tmp.name
        import torch
        import models
        torch.manual_seed(0)
        model = models.MLP().eval()
        data = make_data(1, 0)
        onnx_path = os.path.join(cls.root, "mlp.onnx")
        models.export(model, data, 17, onnx_path)
        cls.plan = os.path.join(cls.root, "mlp.zplan")
        run_tool([cls.compile_bin, onnx_path, "-o", cls.plan, "--lr=1e-2"])

        # Shard k holds 1 + k % 3 steps; written in a shuffled order, named
        # so that name order is k's order.
        sizes = [1 + k % 3 for k in range(SHARDS)]
        cls.total = sum(sizes)
        cls.all = make_data(cls.total, 1)
        cls.shards = os.path.join(cls.root, "shards")
        os.makedirs(cls.shards)
        starts = np.cumsum([0] + sizes)
        for k in np.random.default_rng(2).permutation(SHARDS):
            part = {n: v[starts[k]:starts[k + 1]] for n, v in cls.all.items()}
            st.save_file(part, os.path.join(cls.shards, "part-%05d.safetensors" % k))
        with open(os.path.join(cls.shards, "README"), "w") as f:
            f.write("not a shard\n")
        cls.whole = os.path.join(cls.root, "whole.safetensors")
        st.save_file(cls.all, cls.whole)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def run_zinc(self, data, steps, *flags, name="run"):
        metrics = os.path.join(self.root, name + ".jsonl")
        proc = run_tool([self.run_bin, self.plan, "--backend=cpu", "--steps=%d" % steps,
                         "--data=" + data, "--metrics=" + metrics] + list(flags))
        return losses(metrics), proc.stderr.decode()

    def refused(self, folder):
        proc = subprocess.run([self.run_bin, self.plan, "--backend=cpu", "--steps=2",
                               "--data=" + folder], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, timeout=120)
        self.assertEqual(proc.returncode, 1, proc.stderr.decode())
        lines = proc.stderr.decode().strip().splitlines()
        self.assertEqual(len(lines), 1, lines)
        return lines[0]

    def bad_folder(self, name, second):
        """A folder of a good first shard and `second` as the next one."""
        folder = os.path.join(self.root, name)
        os.makedirs(folder)
        st.save_file(make_data(2, 3), os.path.join(folder, "a.safetensors"))
        st.save_file(second, os.path.join(folder, "b.safetensors"))
        return folder

    def test_same_losses_as_one_file(self):
        """Every step of 100 shards, and 7 past the end (wrapping to the
        first shard), as the one file gives them."""
        steps = self.total + 7
        want, _ = self.run_zinc(self.whole, steps, name="whole")
        got, stderr = self.run_zinc(self.shards, steps, name="shards")
        self.assertEqual(len(want), steps)
        self.assertEqual(got, want)
        self.assertIn("1 entry not named *.safetensors (such as 'README')", stderr)

    def test_two_ranks(self):
        """Under mpirun with 2 ranks (ZeRO-2), each step of a shard holds
        both ranks' rows, as a file's does: the losses of one file."""
        from test_zero import mpirun, run_ranks
        import torch
        import models
        torch.manual_seed(0)
        onnx_path = os.path.join(self.root, "mlp-rank.onnx")
        models.export(models.MLP().eval(), {k: v[:, :BATCH // 2] for k, v in
                                            make_data(1, 0).items()}, 17, onnx_path)
        plan = os.path.join(self.root, "mlp-2.zplan")
        run_tool([self.compile_bin, onnx_path, "-o", plan, "--lr=1e-2", "--ranks=2",
                  "--zero-stage=2"])
        folder = os.path.join(self.root, "rank-shards")
        os.makedirs(folder)
        for k, (a, b) in enumerate(((0, 2), (2, 3), (3, 6))):
            st.save_file({n: v[a:b] for n, v in self.all.items()},
                         os.path.join(folder, "%d.safetensors" % k))
        # 6 steps in all: steps 6 and 7 wrap to the first shard.
        whole = os.path.join(self.root, "rank-whole.safetensors")
        st.save_file({n: v[:6] for n, v in self.all.items()}, whole)
        got = {}
        for name, data in (("file", whole), ("shards", folder)):
            metrics = os.path.join(self.root, "ranks-%s.jsonl" % name)
            run_ranks(mpirun(2) + [self.run_bin, plan, "--backend=cpu", "--steps=8",
                                   "--data=" + data, "--metrics=" + metrics])
            got[name] = losses(metrics)
        self.assertEqual(len(got["file"]), 8)
        self.assertEqual(got["shards"], got["file"])

    def test_resume_mid_shard(self):
        """A checkpoint after step 4, the middle of shard 2 (steps 3..5),
        resumes into the same losses."""
        steps = 12
        want, _ = self.run_zinc(self.shards, steps, name="straight")
        ckpt = os.path.join(self.root, "ckpt")
        first, _ = self.run_zinc(self.shards, 4, "--checkpoint-dir=" + ckpt,
                                 "--checkpoint-every=4", name="first")
        rest, _ = self.run_zinc(self.shards, steps, "--checkpoint-dir=" + ckpt,
                                "--resume=" + ckpt, name="rest")
        self.assertEqual(sorted(first), list(range(4)))
        self.assertEqual(sorted(rest), list(range(4, steps)))
        self.assertEqual({**first, **rest}, want)

    def test_two_shards_resident(self):
        """Peak resident memory over 12 shards of 8 MB stays within 2.5
        shards of the peak over one."""
        pad = np.zeros((1, 2 * 1024 * 1024), np.float32)  # 8 MB no input reads
        peaks = {}
        for count in (1, 12):
            folder = os.path.join(self.root, "big-%d" % count)
            os.makedirs(folder)
            for k in range(count):
                part = dict(make_data(1, 10 + k), pad=pad + k)
                st.save_file(part, os.path.join(folder, "%02d.safetensors" % k))
            # From a small Python of its own: a child forked from this one
            # (torch loaded) would count this process's pages as its peak.
            script = ("import resource, subprocess, sys\n"
                      "subprocess.run(sys.argv[1:], check=True, stdout=subprocess.DEVNULL)\n"
                      "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n")
            # Under AddressSanitizer (make test-sanitize) freed blocks wait in
            # a quarantine of 256 MB, resident: off, so a dropped shard leaves.
            env = dict(os.environ)
            env["ASAN_OPTIONS"] = ":".join(
                x for x in (env.get("ASAN_OPTIONS"), "quarantine_size_mb=0") if x)
            proc = subprocess.run([sys.executable, "-c", script, self.run_bin, self.plan,
                                   "--backend=cpu", "--steps=%d" % count, "--data=" + folder],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                                  timeout=300)
            self.assertEqual(proc.returncode, 0, proc.stderr.decode()[-2000:])
            peaks[count] = int(proc.stdout.decode().split()[-1]) * 1024
        shard = pad.nbytes
        self.assertLess(peaks[12] - peaks[1], 2.5 * shard,
                        "peak RSS: %d bytes over 12 shards, %d over one" % (peaks[12], peaks[1]))

    def test_refusals(self):
        good = make_data(2, 4)
        line = self.refused(self.bad_folder(
            "dtype", dict(good, x=good["x"].astype(np.float64))))
        self.assertRegex(line, r"^zinc-run: error: .*/dtype/b\.safetensors: tensor 'x' is "
                               r"f64, the first shard's f32$")
        line = self.refused(self.bad_folder(
            "rows", dict(good, x=good["x"][:, :8])))
        self.assertRegex(line, r"/rows/b\.safetensors: tensor 'x' is \[2,8,32\], the first "
                               r"shard's \[2,16,32\] \(shards may differ in their step counts")
        line = self.refused(self.bad_folder("missing", {"x": good["x"]}))
        self.assertRegex(line, r"/missing/b\.safetensors: no tensor 'targets', which the "
                               r"first shard \(a\.safetensors\) holds")
        line = self.refused(self.bad_folder("extra", dict(good, other=good["x"])))
        self.assertRegex(line, r"/extra/b\.safetensors: tensor 'other' is not in the first "
                               r"shard \(a\.safetensors\)")
        line = self.refused(self.bad_folder(
            "steps", dict(good, targets=make_data(3, 5)["targets"])))
        self.assertRegex(line, r"/steps/b\.safetensors: tensor 'x' holds 2 steps and tensor "
                               r"'targets' 3; every graph input needs the same step count")
        empty = os.path.join(self.root, "empty")
        os.makedirs(empty)
        self.assertRegex(self.refused(empty), r"/empty: no shards: .* this one is empty$")
        with open(os.path.join(empty, "data.bin"), "w") as f:
            f.write("x")
        self.assertRegex(self.refused(empty),
                         r"/empty: no shards: .* this one has none \(1 other entry, such as 'data\.bin'\)$")
        # The first shard is checked against the plan, as a --data file is.
        folder = os.path.join(self.root, "plan")
        os.makedirs(folder)
        st.save_file({"x": good["x"][:, :, :8], "targets": good["targets"]},
                     os.path.join(folder, "a.safetensors"))
        self.assertRegex(self.refused(folder), r"/plan/a\.safetensors: tensor 'x' is "
                                               r"f32\[2,16,8\], expected f32\[steps,16,32\]")


if __name__ == "__main__":
    unittest.main()
