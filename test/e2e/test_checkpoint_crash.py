"""End-to-end: SIGKILL at any moment of a checkpointed run loses nothing.

The bundled example GPT (examples/gpt/gpt.onnx) is compiled with `make run`'s placement
(AdamW state on NVMe, parameters on the CPU) and trained STEPS steps straight.
Then a run that checkpoints after every step (each checkpoint written beside,
fsynced and renamed) is killed with SIGKILL a quarter, half and three
quarters of the way through its steps (counted on its output, so a loaded
machine cannot make the run end first), at a quarter, half and three
quarters of a step's time after that step printed its loss, when the
checkpoint of that step is being written: wherever the kill lands (between steps, in the
middle of a checkpoint's files, between the rename and the fsync of the
directory), resuming from what is left must end with the straight run's
weights, bit for bit, leave no partial checkpoint once it has written its
own, and no NVMe tier file anywhere (the tier unlinks its file at creation).

Run: ZINC_BUILD_DIR=/path/to/build /usr/bin/python3 -m unittest discover -s test/e2e -p test_checkpoint_crash.py
"""

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

STEPS = 60


def read(path):
    with open(path, "rb") as f:
        return f.read()


class CheckpointCrashTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.compile_bin, cls.run_bin = tools()
        # A disk-backed directory, as the NVMe tier needs for O_DIRECT.
        base = "/var/tmp" if os.path.isdir("/var/tmp") else None
        cls.tmp = tempfile.TemporaryDirectory(prefix="zinc-ckpt-crash-", dir=base)
        cls.plan = os.path.join(cls.tmp.name, "gpt.zplan")
        run([cls.compile_bin, MODEL, "--mode=train", "--optimizer=adamw", "--lr=3e-3",
             "--offload-optimizer=nvme", "--offload-params=cpu", "-o", cls.plan])
        cls.straight = os.path.join(cls.tmp.name, "straight.safetensors")
        start = time.monotonic()
        run(cls.zinc_run(cls, "straight", ["--steps=%d" % STEPS,
                                           "--save-weights=" + cls.straight]))
        cls.straight_seconds = time.monotonic() - start

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def zinc_run(self, name, extra):
        nvme = os.path.join(self.tmp.name, name + "-nvme")
        os.makedirs(nvme, exist_ok=True)
        return [self.run_bin, self.plan, "--data=" + DATA, "--nvme-dir=" + nvme] + extra

    def test_sigkill_at_any_moment_resumes_to_the_same_weights(self):
        for fraction in (0.25, 0.5, 0.75):
            with self.subTest(kill_at=fraction):
                name = "kill-%d" % int(fraction * 100)
                ck = os.path.join(self.tmp.name, name + "-ck")
                # A first checkpoint, so that there is always one to resume.
                run(self.zinc_run(name, ["--steps=5", "--checkpoint-dir=" + ck]))
                proc = subprocess.Popen(
                    self.zinc_run(name, ["--steps=%d" % STEPS, "--resume=" + ck,
                                         "--checkpoint-dir=" + ck, "--checkpoint-every=1"]),
                    stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
                # zinc-run prints (and flushes) "step N: ..." before it
                # checkpoints step N: wait for the step a `fraction` of the
                # way through, then a `fraction` of a step's time into its
                # checkpoint and the next step.
                target = 5 + int((STEPS - 5) * fraction)
                for line in proc.stdout:
                    if line.startswith("step %d:" % target):
                        break
                time.sleep(self.straight_seconds / STEPS * fraction)
                proc.send_signal(signal.SIGKILL)
                proc.stdout.close()
                proc.wait(timeout=TIMEOUT)
                self.assertEqual(proc.returncode, -signal.SIGKILL,
                                 "the run ended before the kill: nothing was tested")
                self.assertEqual(os.listdir(os.path.join(self.tmp.name, name + "-nvme")), [],
                                 "a tier file outlived its process")
                resumed = os.path.join(self.tmp.name, name + ".safetensors")
                run(self.zinc_run(name, ["--steps=%d" % STEPS, "--resume=" + ck,
                                         "--checkpoint-dir=" + ck,
                                         "--save-weights=" + resumed]))
                self.assertEqual(read(resumed), read(self.straight),
                                 "resumed weights differ from the straight run's")
                self.assertEqual([d for d in os.listdir(ck) if "partial" in d], [])


if __name__ == "__main__":
    unittest.main()
