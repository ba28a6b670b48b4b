"""End-to-end: training from a flat file of token ids (nanoGPT's train.bin).

zinc-run --data=FILE --data-format=tokens-u16|tokens-u32
--data-inputs=INPUT,TARGET [--data-order=random|sequential] feeds each row a
window of the input's sequence length T at an offset o: INPUT tokens
[o, o+T), TARGET tokens [o+1, o+T+1). Checks, on the bundled GPT
(examples/gpt/gpt.onnx: tokens, targets i64[4, 32], vocabulary 64):
  - sequential windows (row k of the run at (k*T) mod (len-T-1)) give the
    losses, bit for bit, of the same windows written out as a safetensors
    --data file, in u16 and u32 files, and with 2 ranks under mpirun (rows
    of the global batch, rank 0's first);
  - random windows are the seed's: the same seed gives the same losses, a
    resumed run continues them, another seed gives others;
  - a token outside the embedding's range is refused naming the step, the
    row and the file position; the flags' mistakes end in one line each;
  - resident memory does not grow with the file: a 4 GB (sparse) token
    file trains within 20 MB of a 40 KB one's peak.
"""

import json
import os
import resource
import subprocess
import sys
import tempfile
import unittest

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "test", "lib"))
import safetensors_io as st  # noqa: E402
from harness import run_tool, tools  # noqa: E402

GPT = os.path.join(ROOT, "examples", "gpt", "gpt.onnx")
BATCH, SEQ, VOCAB = 4, 32, 64
STEPS = 6


def sequential_windows(tokens, steps, batch=BATCH):
    """{tokens, targets}: [steps, batch, T] of the sequential order (batch:
    the global batch, every rank's rows)."""
    n = len(tokens)
    x = np.zeros((steps, batch, SEQ), np.int64)
    y = np.zeros((steps, batch, SEQ), np.int64)
    for s in range(steps):
        for r in range(batch):
            k = s * batch + r
            o = (k * SEQ) % (n - SEQ - 1)
            x[s, r] = tokens[o:o + SEQ]
            y[s, r] = tokens[o + 1:o + SEQ + 1]
    return {"tokens": x, "targets": y}


class TokenDataTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.compile_bin, cls.run_bin = tools()
        cls.tmp = tempfile.TemporaryDirectory(prefix="zinc-e2e-tokens-")
        cls.plan = cls.path("gpt.zplan")
        run_tool([cls.compile_bin, GPT, "-o", cls.plan])
        rng = np.random.default_rng(7)
        cls.tokens = rng.integers(0, VOCAB, size=5000)
        cls.tokens.astype(np.uint16).tofile(cls.path("train-u16.bin"))
        cls.tokens.astype(np.uint32).tofile(cls.path("train-u32.bin"))

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    @classmethod
    def path(cls, name):
        return os.path.join(cls.tmp.name, name)

    def losses(self, name, flags, steps=STEPS):
        metrics = self.path(name + ".jsonl")
        run_tool([self.run_bin, self.plan, "--backend=cpu", "--steps=%d" % steps,
                  "--metrics=" + metrics] + flags)
        with open(metrics) as f:
            return [json.loads(line)["loss"] for line in f if line.strip()]

    def token_flags(self, fmt="u16", order=None):
        flags = ["--data=" + self.path("train-%s.bin" % fmt),
                 "--data-format=tokens-" + fmt, "--data-inputs=tokens,targets"]
        return flags + (["--data-order=" + order] if order else [])

    def test_sequential_windows_are_the_safetensors_ones(self):
        """Sequential windows train exactly as the same windows from a
        safetensors file, from u16 and from u32 token files."""
        st.save_file(sequential_windows(self.tokens, STEPS), self.path("windows.safetensors"))
        want = self.losses("safetensors", ["--data=" + self.path("windows.safetensors")])
        for fmt in ("u16", "u32"):
            got = self.losses("seq-" + fmt, self.token_flags(fmt, "sequential"))
            self.assertEqual(got, want, fmt)

    def test_two_ranks_take_the_global_batch_rank_0_first(self):
        """Under mpirun with 2 ranks (ZeRO-2), sequential rows count the
        global batch of 8, rank 0's 4 rows first: the losses are those of the
        same windows as a safetensors file of the global batch."""
        from test_zero import mpirun, run_ranks
        plan = self.path("gpt-2ranks.zplan")
        run_tool([self.compile_bin, GPT, "-o", plan, "--ranks=2", "--zero-stage=2"])
        st.save_file(sequential_windows(self.tokens, 3, batch=2 * BATCH),
                     self.path("windows-2ranks.safetensors"))

        def losses(name, flags):
            metrics = self.path(name + ".jsonl")
            run_ranks(mpirun(2) + [self.run_bin, plan, "--backend=cpu", "--steps=3",
                                   "--metrics=" + metrics] + flags)
            with open(metrics) as f:
                return [json.loads(line)["loss"] for line in f if line.strip()]
        want = losses("2ranks-safetensors",
                      ["--data=" + self.path("windows-2ranks.safetensors")])
        got = losses("2ranks-tokens", self.token_flags("u16", "sequential"))
        self.assertEqual(got, want)

    def test_random_windows_follow_the_seed(self):
        """Random offsets are the seed's: a second run and a resumed run give
        the same losses, another seed other ones."""
        a = self.losses("random-a", self.token_flags() + ["--seed=3"])
        b = self.losses("random-b", self.token_flags() + ["--seed=3"])
        self.assertEqual(a, b)
        c = self.losses("random-c", self.token_flags() + ["--seed=4"])
        self.assertNotEqual(a, c)
        ckpt = self.path("ckpt")
        self.losses("random-first", self.token_flags() + ["--seed=3",
                    "--checkpoint-dir=" + ckpt], steps=3)
        resumed = self.losses("random-resumed", self.token_flags() + [
            "--seed=3", "--resume=" + ckpt])
        self.assertEqual(resumed, a[3:])

    def refusal(self, flags, data=None):
        proc = subprocess.run([self.run_bin, self.plan, "--backend=cpu", "--steps=4"] + flags,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=300)
        self.assertEqual(proc.returncode, 1, proc.stderr.decode())
        lines = proc.stderr.decode().strip().splitlines()
        self.assertEqual(len(lines), 1, lines)
        return lines[0]

    def test_token_outside_the_embedding_is_refused(self):
        """Token 64 (the vocabulary is 64) at file position 100, read by step
        0's row 3 (sequential, rows at 0, 32, 64, 96): refused naming them."""
        bad = self.tokens.copy()
        bad[100] = VOCAB
        bad.astype(np.uint16).tofile(self.path("bad.bin"))
        line = self.refusal(["--data=" + self.path("bad.bin"), "--data-format=tokens-u16",
                             "--data-inputs=tokens,targets", "--data-order=sequential"])
        self.assertEqual(line, "zinc-run: error: %s: step 0, row 3: token 64 at position "
                         "100 is outside the embedding's 64 ids" % self.path("bad.bin"))

    def test_flag_mistakes(self):
        """Each mistake in the --data-* flags ends in one line naming it."""
        path = self.path("train-u16.bin")
        odd = self.path("odd.bin")
        with open(odd, "wb") as f:
            f.write(b"\0" * 4001)
        short = self.path("short.bin")
        np.zeros(SEQ + 1, np.uint16).tofile(short)
        base = ["--data=" + path, "--data-inputs=tokens,targets"]
        cases = [
            (base + ["--data-format=tokens-u8"],
             "--data-format must be tokens-u16 or tokens-u32, not 'tokens-u8'"),
            (["--data=" + path, "--data-format=tokens-u16"],
             "--data-format=tokens-u16 needs --data-inputs=INPUT,TARGET"),
            (base + ["--data-format=tokens-u16", "--data-order=shuffled"],
             "--data-order must be random or sequential, not 'shuffled'"),
            (["--data=" + path, "--data-format=tokens-u16", "--data-inputs=tokens,labels"],
             "--data-inputs=tokens,labels: the plan's graph input 'targets' would get no data"),
            (["--data=" + path, "--data-inputs=tokens,targets"],
             "--data-inputs needs --data-format=tokens-u16|tokens-u32"),
            (["--data-format=tokens-u16", "--data-inputs=tokens,targets"],
             "--data-format needs --data=FILE, the file of token ids"),
            (["--data=" + odd, "--data-format=tokens-u16", "--data-inputs=tokens,targets"],
             odd + ": 4001 bytes is not a whole number of 16-bit tokens"),
            (["--data=" + short, "--data-format=tokens-u16", "--data-inputs=tokens,targets"],
             short + ": 33 tokens, fewer than the 34 a window of 'tokens' (T = 32) and its "
             "target need"),
        ]
        for flags, want in cases:
            with self.subTest(want=want):
                self.assertIn(want, self.refusal(flags))

    def peak_rss_kb(self, data):
        """The zinc-run child's peak resident set, in KiB."""
        script = ("import resource, subprocess, sys\n"
                  "subprocess.run(sys.argv[1:], check=True, stdout=subprocess.DEVNULL)\n"
                  "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n")
        proc = subprocess.run(
            [sys.executable, "-c", script, self.run_bin, self.plan, "--backend=cpu",
             "--steps=40", "--data=" + data, "--data-format=tokens-u16",
             "--data-inputs=tokens,targets"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=600, check=True)
        return int(proc.stdout.decode().split()[-1])

    def test_resident_memory_does_not_grow_with_the_file(self):
        """A 4 GB token file (sparse: token 0 everywhere) trains with a peak
        resident set within 20 MB of a 40 KB file's."""
        big = self.path("big.bin")
        with open(big, "wb") as f:
            f.truncate(4 * 1000 * 1000 * 1000)
        small = self.path("small.bin")
        np.zeros(20000, np.uint16).tofile(small)
        small_kb, big_kb = self.peak_rss_kb(small), self.peak_rss_kb(big)
        self.assertLess(big_kb - small_kb, 20 * 1024,
                        "peak RSS %d KiB with 4 GB of tokens, %d KiB with 40 KB"
                        % (big_kb, small_kb))


if __name__ == "__main__":
    unittest.main()
