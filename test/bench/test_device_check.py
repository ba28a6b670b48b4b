"""scripts/cuda-device-check.sh and its Python parts, without a GPU.

The device check must fit one call of the device tool: its stage limits add
up to at most 480 s (read here from the script's own table, and asserted by
the script), every stage runs in a process group the watchdog kills whole
(the script's --selftest), the scripts parse (bash -n), the pack check
passes for this tree, and the PyTorch baselines and the zinc case driver run
at a tiny size on the CPU.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SCRIPT = os.path.join(ROOT, "scripts", "cuda-device-check.sh")
PACK_SCRIPT = os.path.join(ROOT, "scripts", "make-device-pack.sh")
BUILD = os.environ.get("ZINC_BUILD_DIR", os.path.join(ROOT, "build"))
BUDGET = 480


def stage_table(name):
    """The (stage, limit) rows of the script's STAGE_TABLE or EXTRA_TABLE."""
    text = open(SCRIPT).read()
    m = re.search(r'^%s="\n(.*?)^"' % name, text, re.S | re.M)
    assert m, "no %s in %s" % (name, SCRIPT)
    return [(s, int(l)) for s, l in (line.split() for line in m.group(1).splitlines()
                                     if line.strip())]


def run(argv, **kw):
    return subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          **kw)


class DeviceCheckScriptTest(unittest.TestCase):
    def test_scripts_parse(self):
        for script in (SCRIPT, PACK_SCRIPT):
            proc = run(["bash", "-n", script])
            self.assertEqual(proc.returncode, 0, proc.stderr)

    def test_default_stage_limits_fit_one_call(self):
        rows = stage_table("STAGE_TABLE")
        names = [s for s, _ in rows]
        self.assertLessEqual(sum(l for _, l in rows), BUDGET, rows)
        # The order is the importance: calibration feeds the big model, which
        # comes before its baselines and everything else.
        self.assertEqual(names[:3], ["calibrate", "unit", "big-cpu"])
        for stage in ("fsdp2", "unlimited", "big-dpu", "big-nvme", "resident-zinc",
                      "resident-torch", "attention", "e2e", "ceilings", "memcheck"):
            self.assertIn(stage, names)
        self.assertEqual(names[-1], "memcheck")
        proc = run(["bash", SCRIPT, "--check"])
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn("limits: %d s of %d s" % (sum(l for _, l in rows), BUDGET), proc.stdout)

    def test_the_script_refuses_stages_over_the_budget(self):
        extra = dict(stage_table("EXTRA_TABLE"))
        env = dict(os.environ, STAGES="big-cpu fsdp2 unlimited big-dpu big-nvme compare train")
        proc = run(["bash", SCRIPT, "--check"], env=env)
        self.assertEqual(proc.returncode, 2)
        self.assertIn("over the budget of 480 s", proc.stderr)
        self.assertIn("compare", extra)
        proc = run(["bash", SCRIPT, "--check"], env=dict(os.environ, STAGES="nonesuch"))
        self.assertEqual(proc.returncode, 2)
        self.assertIn("unknown stage 'nonesuch'", proc.stderr)

    def test_every_stage_has_a_case(self):
        text = open(SCRIPT).read()
        for stage, _ in stage_table("STAGE_TABLE") + stage_table("EXTRA_TABLE"):
            self.assertRegex(text, r"\n  %s\)\n" % re.escape(stage), stage)

    def test_watchdog_kills_the_whole_group(self):
        proc = run(["bash", SCRIPT, "--selftest"], timeout=60)
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        self.assertIn("selftest: ok", proc.stdout)

    def test_tree_fits_the_device_call(self):
        proc = run(["bash", PACK_SCRIPT, "--check-size", "/nonexistent-pack"])
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        self.assertIn("of 64 MiB", proc.stdout)


class OpenMpiPackTest(unittest.TestCase):
    """scripts/pack-openmpi.sh: the pack's mpirun, relocated by OPAL_PREFIX,
    starts two ranks that see their local ranks (what the zero-mpi stage
    needs on a GPU machine without a package registry)."""

    def test_packed_mpirun_starts_two_ranks(self):
        exe = shutil.which("mpirun")
        if not exe or os.path.basename(os.path.realpath(exe)) != "orterun":
            self.skipTest("no Open MPI 4 mpirun here")
        script = os.path.join(ROOT, "scripts", "pack-openmpi.sh")
        with tempfile.TemporaryDirectory() as dest:
            proc = run(["bash", script, dest], timeout=120)
            self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
            for path in ("ompi/bin/mpirun", "lib/libmpi.so.40", "lib/libopen-rte.so.40"):
                self.assertTrue(os.path.exists(os.path.join(dest, path)), path)
            components = os.listdir(os.path.join(
                dest, "ompi", "lib", "x86_64-linux-gnu", "openmpi", "lib", "openmpi3"))
            for c in ("mca_pml_ob1.so", "mca_btl_vader.so", "mca_plm_rsh.so"):
                self.assertIn(c, components)
            proc = run(["bash", "-c",
                        '. "$0" --env "$1" && [ "$(command -v mpirun)" = "$1/ompi/bin/mpirun" ] '
                        '&& mpirun --oversubscribe -np 2 bash -c '
                        '"echo rank \\$OMPI_COMM_WORLD_RANK local \\$OMPI_COMM_WORLD_LOCAL_RANK"',
                        script, dest], timeout=120)
            self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
            self.assertEqual(sorted(proc.stdout.split("\n")[:2]),
                             ["rank 0 local 0", "rank 1 local 1"])


class BaselinesTest(unittest.TestCase):
    def test_compiles(self):
        for name in ("gpu_baselines.py", "zinc_gpu_case.py"):
            proc = run([sys.executable, "-m", "py_compile", os.path.join(ROOT, "bench", name)])
            self.assertEqual(proc.returncode, 0, proc.stderr)
            proc = run([sys.executable, os.path.join(ROOT, "bench", name), "--help"])
            self.assertEqual(proc.returncode, 0, proc.stderr)

    def test_dry_run_on_the_cpu(self):
        try:
            import torch  # noqa: F401
        except ImportError:
            self.skipTest("no torch")
        proc = run([sys.executable, os.path.join(ROOT, "bench", "gpu_baselines.py"),
                    "dry-run"], timeout=120)
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        d = json.loads(proc.stdout)
        self.assertNotIn("error", d)
        r = d["resident"]
        self.assertTrue(r["losses_finite"])
        self.assertTrue(r["loss_falling"], r["losses"])
        if "params_shape_gpt" in r:  # The same parameters as zinc's model.
            self.assertEqual(r["params"], r["params_shape_gpt"])
        u = d["unlimited"]
        self.assertEqual([p["layers"] for p in u["probes"]], [1, 2])
        self.assertGreater(u["step_seconds"], 0)
        # FSDP2 and SDPA run where torch has them, else say why not.
        for mode in ("fsdp2", "attention"):
            self.assertTrue("skipped" in d[mode] or "step_seconds" in d[mode]
                            or "rows" in d[mode], d[mode])

    def test_zinc_case_on_the_cpu_backend(self):
        if not os.path.exists(os.path.join(BUILD, "tools", "zinc-run")):
            self.skipTest("no zinc-run in %s" % BUILD)
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "tiny.json")
            proc = run([sys.executable, os.path.join(ROOT, "bench", "zinc_gpu_case.py"),
                        "--name", "tiny", "--layers", "2", "--d-model", "32", "--heads", "4",
                        "--seq", "16", "--batch", "2", "--vocab", "97", "--hw", "cpu",
                        "--backend", "cpu", "--build-dir", BUILD, "--warmup", "1",
                        "--steps", "2", "--out", out], timeout=120)
            self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
            d = json.load(open(out))
            self.assertEqual(len(d["losses"]), 3)
            self.assertTrue(d["losses_finite"])
            self.assertTrue(d["loss_falling"], d["losses"])
            self.assertGreater(d["step_seconds"], 0)
            self.assertGreater(d["predicted_step_seconds"], 0)
            self.assertEqual(d["report"]["params"], d["model"]["params"])


if __name__ == "__main__":
    unittest.main()
