"""Smoke test of bench/predicted_step.py: calibrate, compile, train, compare.

On the bundled example with one short repetition: the script must calibrate
this machine (the NVMe latencies and the preemption among its fields),
compile the offload plan against that description, train it, and write the
JSON with the prediction, the measured step and their ratio. The figures
themselves are the benchmark's (bench/README.md), not this test's: only
that they are there and sane. Needs zinc-run and zinc-compile:
ZINC_BUILD_DIR (set by ctest), else ./build.
"""

import json
import os
import sys
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "bench"))
import predicted_step  # noqa: E402

BUILD = os.environ.get("ZINC_BUILD_DIR", os.path.join(ROOT, "build"))


class PredictedStepTest(unittest.TestCase):
    def test_one_short_run_writes_prediction_and_measurement(self):
        with tempfile.TemporaryDirectory(dir="/var/tmp") as work:
            out = os.path.join(work, "result.json")
            code = predicted_step.main(["--build-dir", BUILD, "--dir", os.path.join(work, "run"),
                                        "--reps", "2", "--warmup", "1", "--steps", "2",
                                        "--out", out])
            self.assertEqual(code, 0)
            with open(out) as f:
                result = json.load(f)
        calibration = result["calibration"]
        for field in ("preemption_seconds", "nvme_read_latency_seconds",
                      "nvme_write_latency_seconds", "event_wait_seconds", "product_seconds"):
            self.assertIn(field, calibration)
        self.assertGreater(calibration["nvme_write_bandwidth"], 0)
        predicted = result["predicted"]
        self.assertGreater(predicted["step_seconds"], 0)
        self.assertLessEqual(predicted["lower_bound_seconds"], predicted["step_seconds"])
        self.assertGreater(result["measured_step_seconds"], 0)
        self.assertAlmostEqual(result["measured_over_predicted"],
                               result["measured_step_seconds"] / predicted["step_seconds"])
        self.assertEqual(len(result["repetitions"]), 2)
        for rep in result["repetitions"]:
            self.assertEqual(len(rep["step_seconds"]), 2)
        self.assertIn("nvme", result["placement"])


if __name__ == "__main__":
    unittest.main()
