"""End-to-end: offloading changes no bit, and the GPU tier holds what the plan proves.

A GPT-style decoder (the bundled example's model class, sized so that its
parameters, not its activations, dominate the memory, as in the large models
offloading is for: vocab 512, d_model 128, batch 1, sequence 8) is exported
and trained for 8 steps on the cpu backend:

  all-GPU:     zinc-compile --offload-optimizer=none --offload-params=none
  offloaded:   --gpu-mem = a quarter of its model-state bytes,
               --offload-optimizer=nvme --offload-params=cpu  (zinc-run --nvme-dir)
  auto:        --offload-*=auto at three GPU capacities

Every offloaded or auto run must give bit-identical losses and weights to the
all-GPU run (copies move bytes exactly; the kernels are the same), and in
every run, in the GPU and the CPU tier, the measured high-water mark (metrics
peak_bytes: the end of the highest page of the tier's arena that was touched,
read with mincore, kernel workspaces included) must match the plan's proven
peak (the compile report's per_rank.tiers.*.peak) to within a page: never
above it rounded up to a page (the arena opens no more, and a kernel touching
past it faults), and less than a page below it (the measurement's resolution:
the buffer that reaches the proven peak is touched to its end). The proven
GPU peak stays under the capacity. A budget that cannot fit is refused with
the smallest capacity that would.

Run: ZINC_BUILD_DIR=/path/to/build /usr/bin/python3 -m unittest discover -s test/e2e -p test_offload.py
"""

import json
import os
import re
import subprocess
import sys
import tempfile
import unittest

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "examples", "gpt"))
sys.path.insert(0, os.path.join(ROOT, "test", "lib"))
import export_gpt  # noqa: E402
import safetensors_io  # noqa: E402

STEPS = 8
TIMEOUT = 600
# The measured peaks' resolution: the arenas' pages.
PAGE = 4096


def tools():
    build = os.environ.get("ZINC_BUILD_DIR", "./build")
    bins = [os.path.join(build, "tools", t) for t in ("zinc-compile", "zinc-run")]
    missing = [p for p in bins if not os.access(p, os.X_OK)]
    if missing:
        if "ZINC_BUILD_DIR" in os.environ:
            raise AssertionError("ZINC_BUILD_DIR is set but %s missing" % missing)
        raise unittest.SkipTest("zinc tools not built; set ZINC_BUILD_DIR")
    return bins


def run(argv, expect_ok=True):
    proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          timeout=TIMEOUT)
    if expect_ok and proc.returncode != 0:
        raise AssertionError("%s exited %d:\n%s%s" % (
            " ".join(argv), proc.returncode, proc.stdout.decode()[-2000:],
            proc.stderr.decode()[-4000:]))
    return proc


def export_param_heavy_gpt(path, data_path):
    """The example's GPT class at sizes where parameters dominate."""
    sizes = dict(VOCAB=512, D_MODEL=128, N_HEAD=4, N_LAYER=2, D_FF=512, SEQ=8,
                 BATCH=1)
    with export_gpt.sized(**sizes):
        torch.manual_seed(0)
        model = export_gpt.GPT().eval()
        rng = np.random.default_rng(0)
        tokens = rng.integers(0, sizes["VOCAB"], size=(STEPS, 1, sizes["SEQ"]))
        targets = np.roll(tokens, -1, axis=2)
        torch.onnx.export(model, (torch.from_numpy(tokens[0]), torch.from_numpy(targets[0])),
                          path, input_names=["tokens", "targets"], output_names=["loss"],
                          opset_version=17, do_constant_folding=True,
                          training=torch.onnx.TrainingMode.EVAL)
    safetensors_io.save_file({"tokens": tokens.astype(np.int64),
                              "targets": targets.astype(np.int64)}, data_path)


class OffloadTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.compile_bin, cls.run_bin = tools()
        cls.tmp = tempfile.TemporaryDirectory(prefix="zinc-offload-")
        cls.model = os.path.join(cls.tmp.name, "gpt.onnx")
        cls.data = os.path.join(cls.tmp.name, "data.safetensors")
        export_param_heavy_gpt(cls.model, cls.data)
        cls.reference = cls.train("all-gpu", ["--offload-optimizer=none",
                                              "--offload-params=none"])
        cls.model_states = cls.reference["report"]["per_rank"]["model_states_bytes"]["total"]

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    @classmethod
    def train(cls, name, flags):
        d = os.path.join(cls.tmp.name, name)
        os.makedirs(d, exist_ok=True)
        plan, report = os.path.join(d, "plan.zplan"), os.path.join(d, "report.json")
        compiled = run([cls.compile_bin, cls.model, "-o", plan, "--report=" + report] + flags)
        nvme = os.path.join(d, "nvme")
        os.makedirs(nvme, exist_ok=True)
        metrics, weights = os.path.join(d, "metrics.jsonl"), os.path.join(d, "w.safetensors")
        run([cls.run_bin, plan, "--steps=%d" % STEPS, "--data=" + cls.data,
             "--nvme-dir=" + nvme, "--metrics=" + metrics, "--save-weights=" + weights])
        with open(report) as f:
            rep = json.load(f)
        with open(metrics) as f:
            lines = [json.loads(l) for l in f]
        return {"name": name, "report": rep, "metrics": lines,
                "weights": safetensors_io.load_file(weights), "note": compiled.stderr.decode()}

    def check_identical_and_proven(self, run_result, capacity):
        ref = self.reference
        self.assertEqual([m["loss"] for m in run_result["metrics"]],
                         [m["loss"] for m in ref["metrics"]], "losses differ")
        self.assertEqual(sorted(run_result["weights"]), sorted(ref["weights"]))
        for name, w in ref["weights"].items():
            self.assertTrue(np.array_equal(np.asarray(run_result["weights"][name]), np.asarray(w)),
                            "weight %s differs" % name)
        proven = run_result["report"]["per_rank"]["tiers"]["gpu"]["peak"]
        self.assertLessEqual(proven, capacity)
        self.check_measured_peaks(run_result)

    def check_measured_peaks(self, run_result):
        """The measured high-water marks against the proven peaks, per tier."""
        for tier in ("gpu", "cpu"):
            proven = run_result["report"]["per_rank"]["tiers"][tier]["peak"]
            measured = [m["peak_bytes"][tier] for m in run_result["metrics"]]
            # Touched pages stay touched: the mark never falls, and the first
            # step touches everything a step touches.
            self.assertEqual(measured, [measured[0]] * len(measured), tier)
            opened = -(-proven // PAGE) * PAGE
            print("\n%s %s: proven %d, measured %d (proven rounded up to a page %d)"
                  % (run_result["name"], tier, proven, measured[0], opened),
                  file=sys.stderr)
            self.assertEqual(measured[0] % PAGE, 0, tier)
            self.assertLessEqual(measured[0], opened, "%s: touched past the proven peak" % tier)
            self.assertGreater(measured[0] + PAGE, proven,
                               "%s: the plan proves more than a step touches" % tier)

    def test_all_gpu_measured_peak(self):
        self.check_measured_peaks(self.reference)

    def test_quarter_of_model_states_with_nvme_optimizer_and_cpu_params(self):
        capacity = self.model_states // 4
        result = self.train("quarter", ["--gpu-mem=%d" % capacity,
                                        "--offload-optimizer=nvme", "--offload-params=cpu"])
        self.check_identical_and_proven(result, capacity)
        moved = result["metrics"][-1]["bytes"]
        self.assertGreater(moved["h2d"], 0)
        self.assertGreater(moved["d2h"], 0)
        self.assertGreater(moved["nvme_read"], 0)
        self.assertGreater(moved["nvme_write"], 0)

    def test_auto_at_three_capacities(self):
        all_gpu_peak = self.reference["report"]["per_rank"]["tiers"]["gpu"]["peak"]
        for capacity in (all_gpu_peak, self.model_states // 2, self.model_states // 4):
            with self.subTest(capacity=capacity):
                result = self.train("auto-%d" % capacity, ["--gpu-mem=%d" % capacity])
                self.check_identical_and_proven(result, capacity)
                self.assertIn("placement:", result["note"])

    def test_cpu_tier_overflow_waits_on_nvme(self):
        """A CPU tier too small for the gradients waiting for the host update:
        they wait on NVMe instead (the spill pass's CPU round), bit for bit."""
        capacity = self.model_states // 4
        flags = ["--gpu-mem=%d" % capacity, "--offload-optimizer=nvme", "--offload-params=nvme"]
        roomy = self.train("nvme-roomy-cpu", flags)
        tight = roomy["report"]["per_rank"]["tiers"]["cpu"]["peak"] // 2
        result = self.train("nvme-tight-cpu", flags + ["--cpu-mem=%d" % tight])
        self.check_identical_and_proven(result, capacity)
        self.assertLessEqual(result["report"]["per_rank"]["tiers"]["cpu"]["peak"], tight)
        moved = result["metrics"][-1]["bytes"]
        self.assertGreater(moved["nvme_write"], roomy["metrics"][-1]["bytes"]["nvme_write"],
                           "nothing more went to NVMe")
        predicted = result["report"]["predicted_transfer_bytes_per_step"]
        self.assertEqual(predicted["nvme_write"], moved["nvme_write"])
        self.assertEqual(predicted["nvme_read"], moved["nvme_read"])

    def test_budget_that_cannot_fit_names_the_capacity_that_would(self):
        plan = os.path.join(self.tmp.name, "too-small.zplan")
        proc = run([self.compile_bin, self.model, "-o", plan, "--gpu-mem=4KiB"], expect_ok=False)
        self.assertEqual(proc.returncode, 1)
        err = proc.stderr.decode()
        m = re.search(r"gpu memory but the tier holds 4096 .*use --gpu-mem=(\d+) or more", err)
        self.assertIsNotNone(m, err)
        self.assertFalse(os.path.exists(plan))
        # The capacity it names is one that fits.
        ok = run([self.compile_bin, self.model, "-o", plan, "--gpu-mem=" + m.group(1)])
        self.assertEqual(ok.returncode, 0)


if __name__ == "__main__":
    unittest.main()
