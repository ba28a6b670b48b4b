"""End-to-end: the largest models plan on one 32 GiB GPU, tiled and checkpointed.

Shape-only GPT training graphs (bench/shape_gpt.py: external weights that do
not exist, which the compiler never reads), compiled as issue 10 sets them:
seq 2048, batch 1, fp16 with Adam, --hw=dgx2-v100 (32 GiB GPU, 96 GiB of host
memory), one rank, optimizer states and parameters on NVMe, --nvme-mem=4TB:

  gpt-175b     96 layers, d_model 12288: its activations kept for backward
               are 83 GB; activation checkpointing keeps a residual per
               segment and recomputes the rest in backward
  wide-65536   2 layers, d_model 65536: its MLP weights are 32 GiB each in
               fp16, the whole V100; the tile pass splits them

Both must compile, with a proven GPU peak under 32 GiB and the host tier
within its 96 GiB, and the report must show the tiles and the checkpoints.

Long sequences: a 1.45B GPT (24 layers, d_model 2048, 16 heads) at seq
16384, whose bf16 attention scores alone would be 8 GiB a layer, plans for
the 32 GiB GPU with fused attention keeping O(T) per head: its activations
kept for backward drop by at least the [T, T] scores of every layer and
head against --fuse-attention=false, and so does the recomputation.

And as issue 11 sets it, ZeRO-Infinity's headline: the 1T model (128 layers,
d_model 25600) on one DGX-2, 16 ranks at ZeRO stage 3 with the optimizer
states and parameters on NVMe, fits each rank's 32 GiB V100, and each rank
holds 16 bytes x params / 16 of model states.
How long the compiles take is bench/compile_scale.py's to measure
(--budget v100-fp16).

Run: ZINC_BUILD_DIR=/path/to/build /usr/bin/python3 -m unittest discover -s test/e2e -p test_largest_models.py
"""

import json
import os
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "bench"))
from harness import run_tool, tools  # noqa: E402
import compile_scale  # noqa: E402
import shape_gpt  # noqa: E402

GIB = 1 << 30


class LargestModelsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.compile_bin, _ = tools()
        cls.tmp = tempfile.TemporaryDirectory(prefix="zinc-largest-")

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def compile(self, cfg, flags=compile_scale.V100_FP16):
        model = os.path.join(self.tmp.name, cfg.name + ".onnx")
        shape_gpt.write_model(cfg, model)
        plan = os.path.join(self.tmp.name, cfg.name + ".zplan")
        report = os.path.join(self.tmp.name, cfg.name + ".json")
        run_tool([self.compile_bin, model, "-o", plan, "--report=" + report] + flags)
        with open(report) as f:
            rep = json.load(f)
        tiers = rep["per_rank"]["tiers"]
        self.assertLess(tiers["gpu"]["peak"], 32 * GIB)
        self.assertLessEqual(tiers["cpu"]["peak"], tiers["cpu"]["capacity"])
        self.assertLessEqual(tiers["nvme"]["peak"], tiers["nvme"]["capacity"])
        want = next(f.split("=")[1] for f in flags if f.startswith("--precision="))
        self.assertEqual(rep["config"]["precision"], want)
        return rep

    def test_gpt_175b_checkpoints_and_recomputes(self):
        rep = self.compile(shape_gpt.Config("gpt-175b", 96, 12288, 96))
        self.assertGreater(rep["model"]["params"], 175e9)
        ac = rep["activation_checkpointing"]
        self.assertEqual(ac["mode"], "auto")
        self.assertGreaterEqual(ac["recomputed_segments"], 96)
        self.assertGreater(ac["recompute_flops"], 0)
        # Kept whole, the activations would need more than twice the GPU
        # (fused attention keeps no [T, T] scores, so they are O(T)).
        self.assertGreater(ac["saved_bytes_before"], 2 * 32 * GIB)
        self.assertLess(ac["saved_bytes_after"], 32 * GIB)
        self.assertEqual(len(ac["checkpoints"]), ac["recomputed_segments"])
        moved = rep["predicted_transfer_bytes_per_step"]
        self.assertGreater(moved["h2d"], 0)
        self.assertGreater(moved["nvme_read"], 0)

    def test_long_sequence_attention_is_linear_in_t(self):
        cfg = shape_gpt.Config("gpt-1.3b-16k", 24, 2048, 16, seq=16384)
        flags = ["--hw=dgx2-v100", "--precision=bf16", "--gpu-mem=32GiB"]
        fused = self.compile(cfg, flags)["activation_checkpointing"]
        unfused = self.compile(cfg, flags + ["--fuse-attention=false"])["activation_checkpointing"]
        scores = cfg.layers * cfg.heads * cfg.seq * cfg.seq * 2  # bf16 [T, T] per head
        self.assertGreater(unfused["saved_bytes_before"] - fused["saved_bytes_before"],
                           0.9 * scores)
        self.assertLess(fused["saved_bytes_before"], 32 * GIB)
        self.assertLess(fused["recompute_flops"], unfused["recompute_flops"])

    def test_gpt_1t_fits_one_dgx2_at_zero_stage_3(self):
        ranks = 16
        rep = self.compile(shape_gpt.Config("gpt-1t", 128, 25600, 160),
                           compile_scale.DGX2_ZERO3 + ["--ranks=%d" % ranks])
        self.assertEqual((rep["config"]["ranks"], rep["config"]["zero_stage"]), (ranks, 3))
        psi = rep["model"]["params"]
        self.assertGreater(psi, 1e12)
        states = rep["per_rank"]["model_states_bytes"]["total"]
        # 16 psi / N, each tensor padded to a whole shard per rank.
        self.assertGreaterEqual(states, 16 * psi // ranks)
        self.assertLess(states, 16 * psi // ranks * 1.001)
        gathered = rep["predicted_collective_bytes_per_step"]["allgather"]
        self.assertGreaterEqual(gathered, 2 * 2 * psi)  # fp16 weights, forward and backward

    def test_65536_wide_layers_are_tiled(self):
        rep = self.compile(shape_gpt.Config("wide-65536", 2, 65536, 64))
        tiled = {t["node"]: t["tiles"] for t in rep["tiling"]}
        for layer in (0, 1):
            for op in ("fc", "out"):
                node = "/blocks.%d/%s/MatMul" % (layer, op)
                self.assertIn(node, tiled, rep["tiling"])
                # 32 GiB of weight, with its gradient and the next tile's
                # prefetch, in half of a 32 GiB GPU: many tiles.
                self.assertGreaterEqual(tiled[node], 4)


if __name__ == "__main__":
    unittest.main()
