"""End-to-end: SIGTERM and SIGINT stop a run cleanly.

A run that checkpoints after every step, with its AdamW state on NVMe and a
trace and metrics asked for, is sent SIGTERM (a scheduler's stop) or SIGINT
(Ctrl-C) a few steps in, at several moments of a step, so that some signals
land while a checkpoint is being written. Each time zinc-run must exit
128 + the signal with a one-line note, leave no partial checkpoint and no
NVMe tier file, and have written a metrics line per step done and a trace
that parses; its newest checkpoint resumes.

Run: ZINC_BUILD_DIR=/path/to/build /usr/bin/python3 -m unittest discover -s test/e2e -p test_stop_signals.py
"""

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
MODEL = os.path.join(ROOT, "examples", "gpt", "gpt.onnx")
DATA = os.path.join(ROOT, "examples", "gpt", "data.safetensors")
sys.path.insert(0, HERE)
from harness import TIMEOUT, run_tool as run, tools  # noqa: E402

STEPS = 100000


class StopSignalTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.compile_bin, cls.run_bin = tools()
        # A disk-backed directory, as the NVMe tier needs for O_DIRECT.
        base = "/var/tmp" if os.path.isdir("/var/tmp") else None
        cls.tmp = tempfile.TemporaryDirectory(prefix="zinc-stop-", dir=base)
        cls.plan = os.path.join(cls.tmp.name, "gpt.zplan")
        run([cls.compile_bin, MODEL, "--mode=train", "--optimizer=adamw",
             "--offload-optimizer=nvme", "--offload-params=cpu", "-o", cls.plan])

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def stop(self, name, sig, delay):
        """Starts a run, sends `sig` `delay` seconds after step 3 printed:
        (exit status, stderr, checkpoint dir, nvme dir, metrics, trace)."""
        d = os.path.join(self.tmp.name, name)
        nvme, ck = os.path.join(d, "nvme"), os.path.join(d, "ck")
        os.makedirs(nvme)
        metrics, trace = os.path.join(d, "m.jsonl"), os.path.join(d, "trace.json")
        proc = subprocess.Popen(
            [self.run_bin, self.plan, "--data=" + DATA, "--nvme-dir=" + nvme,
             "--steps=%d" % STEPS, "--checkpoint-dir=" + ck, "--checkpoint-every=1",
             "--metrics=" + metrics, "--trace=" + trace],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for line in proc.stdout:
            if line.startswith("step 3:"):
                break
        time.sleep(delay)
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=TIMEOUT)
        return proc.returncode, err, ck, nvme, metrics, trace

    def check_clean_stop(self, name, sig, delay):
        status, err, ck, nvme, metrics, trace = self.stop(name, sig, delay)
        self.assertEqual(status, 128 + sig, err)
        sig_name = "SIGTERM" if sig == signal.SIGTERM else "SIGINT"
        notes = [l for l in err.splitlines() if "stopped by" in l]
        self.assertEqual(len(notes), 1, err)
        self.assertRegex(notes[0], r"^zinc-run: note: stopped by %s with (\d+) of %d steps "
                                   r"done; their metrics and trace are written, no partial "
                                   r"checkpoint is left$" % (sig_name, STEPS))
        done = int(notes[0].split(" with ")[1].split()[0])
        with open(metrics) as f:
            lines = [json.loads(line) for line in f]
        self.assertEqual([l["step"] for l in lines], list(range(done)))
        with open(trace) as f:
            events = json.load(f)["traceEvents"]
        self.assertTrue(any(e["ph"] == "X" for e in events))
        self.assertEqual([n for n in os.listdir(ck) if "partial" in n], [])
        self.assertEqual(os.listdir(nvme), [], "a tier file outlived its process")
        self.assertNotIn(".zinc-lock", os.listdir(ck))
        # The newest checkpoint is whole: the step just done, or the one
        # before when the signal abandoned the step's checkpoint.
        newest = max(int(n[5:]) for n in os.listdir(ck) if n.startswith("step-"))
        self.assertIn(newest, (done, done - 1))
        resumed = run([self.run_bin, self.plan, "--data=" + DATA, "--nvme-dir=" + nvme,
                       "--resume=" + ck, "--steps=%d" % (newest + 1)])
        self.assertIn("step %d: loss" % newest, resumed.stdout.decode())

    def test_sigterm_stops_cleanly(self):
        for delay in (0.0, 0.01, 0.03, 0.1):
            with self.subTest(delay=delay):
                self.check_clean_stop("term-%g" % delay, signal.SIGTERM, delay)

    def test_sigint_stops_cleanly(self):
        self.check_clean_stop("int", signal.SIGINT, 0.02)


if __name__ == "__main__":
    unittest.main()
