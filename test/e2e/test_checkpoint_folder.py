"""End-to-end: a checkpoint folder belongs to one run at a time.

While a run checkpoints into a directory it holds the directory's lock: a
second zinc-run on the same --checkpoint-dir is refused before it touches
anything, naming the first one's pid and host, and the first run's
checkpoints stay its own. A run killed with SIGKILL leaves its lock file
behind, but not the lock: the next run takes the directory.

Run: ZINC_BUILD_DIR=/path/to/build /usr/bin/python3 -m unittest discover -s test/e2e -p test_checkpoint_folder.py
"""

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
MODEL = os.path.join(ROOT, "examples", "gpt", "gpt.onnx")
DATA = os.path.join(ROOT, "examples", "gpt", "data.safetensors")
sys.path.insert(0, HERE)
from harness import TIMEOUT, run_tool as run, tools  # noqa: E402


class CheckpointFolderTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.compile_bin, cls.run_bin = tools()
        cls.tmp = tempfile.TemporaryDirectory(prefix="zinc-ckpt-folder-")
        cls.plan = os.path.join(cls.tmp.name, "gpt.zplan")
        run([cls.compile_bin, MODEL, "--mode=train", "--optimizer=adamw", "-o", cls.plan])

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def start_first_run(self, ck):
        """A run that checkpoints every step for far longer than the test
        takes, once it has written its first checkpoint."""
        proc = subprocess.Popen(
            [self.run_bin, self.plan, "--data=" + DATA, "--steps=100000",
             "--checkpoint-dir=" + ck, "--checkpoint-every=1", "--checkpoint-keep=2"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        for line in proc.stdout:
            # "step 1" prints after step 0's checkpoint is in place.
            if line.startswith("step 1:"):
                return proc
        proc.wait(timeout=TIMEOUT)
        self.fail("the first run ended early (exit %s)" % proc.returncode)

    def test_a_second_run_on_the_same_folder_is_refused(self):
        ck = os.path.join(self.tmp.name, "shared")
        first = self.start_first_run(ck)
        try:
            second = subprocess.run(
                [self.run_bin, self.plan, "--data=" + DATA, "--steps=3",
                 "--checkpoint-dir=" + ck, "--checkpoint-every=1"],
                capture_output=True, text=True, timeout=TIMEOUT)
            self.assertEqual(second.returncode, 1, second.stderr)
            self.assertIn("zinc-run: error: %s: --checkpoint-dir is in use by another "
                          "zinc-run (pid %d on host %s, since " % (ck, first.pid,
                                                                 socket.gethostname()),
                          second.stderr)
            self.assertNotIn("step 0", second.stdout, "the refused run trained")
            # Every checkpoint in the folder is the first run's.
            self.assertIsNone(first.poll(), "the first run stopped")
            runs = set()
            for name in os.listdir(ck):
                if name.startswith("step-") and "partial" not in name:
                    try:
                        with open(os.path.join(ck, name, "manifest.json")) as f:
                            runs.add(json.load(f)["run_id"])
                    except FileNotFoundError:
                        pass  # pruned by the first run meanwhile
            self.assertEqual(len(runs), 1, runs)
        finally:
            first.send_signal(signal.SIGKILL)
            first.stdout.close()
            first.wait(timeout=TIMEOUT)
        # Killed, the first run leaves its lock file but holds no lock: the
        # next run takes the folder and resumes the first run's checkpoint.
        self.assertTrue(os.path.exists(os.path.join(ck, ".zinc-lock")))
        newest = max(int(name[5:]) for name in os.listdir(ck)
                     if name.startswith("step-") and name[5:].isdigit())
        third = run([self.run_bin, self.plan, "--data=" + DATA, "--resume=" + ck,
                     "--checkpoint-dir=" + ck, "--steps=%d" % (newest + 1)])
        self.assertIn("resuming from %s/step-%d" % (ck, newest), third.stderr.decode())
        self.assertTrue(os.path.exists(os.path.join(ck, "step-%d" % (newest + 1))))
        self.assertFalse(os.path.exists(os.path.join(ck, ".zinc-lock")),
                         "a run that ended left its lock file")


if __name__ == "__main__":
    unittest.main()
