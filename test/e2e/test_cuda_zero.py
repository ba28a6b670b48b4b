"""End-to-end: ZeRO on the cuda backend, several ranks under mpirun.

Everywhere (no GPU needed), zinc-run's one-line refusals of --comm:
  - a value other than auto, nccl or mpi;
  - --comm=nccl on the cpu backend (its ranks exchange over MPI);
  - --comm=nccl in a zinc-run built without NCCL (a build without the cuda
    backend; skipped where zinc-run has it).

With a CUDA device (skipped, saying why, without one), the bundled GPT
example (examples/gpt, batch 4 per rank) compiled for two ranks, trained
under `mpirun -np 2`:
  - at ZeRO stages 1, 2 and 3, `--backend=cuda --comm=mpi` (collectives
    staged through pinned host memory, so both ranks may share one GPU)
    against the same plan on the cpu backend: every step's loss within 1e-5
    relative, the gathered weights within 1e-3 of the largest weight (Adam
    makes whole steps of the noise in a gradient that is exactly zero), and
    the device communicator's all-gather bytes counted in --metrics;
  - a checkpoint of the two GPU ranks at stage 3 holds the cpu backend's
    weights (within 1e-3 of the largest), and resumes on one GPU rank as the
    cpu backend's checkpoint resumes on one cpu rank (losses within 1e-5);
  - the optimizer on the CPU (stage 1), and on NVMe with the parameters on
    the CPU (stage 3), as the cpu backend (losses within 1e-5);
  - bf16 at stage 3 tracks the fp32 plan on the cpu backend within 5e-2;
  - where the ranks outnumber the GPUs: --comm=nccl is refused in one line,
    and --comm=auto says it stages through MPI.

Run: ZINC_BUILD_DIR=build python3 -m unittest discover -s test/e2e -p test_cuda_zero.py
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "test", "lib"))
import safetensors_io  # noqa: E402

GPT = os.path.join(ROOT, "examples", "gpt")
RANKS = 2
STEPS = 4
RTOL = 1e-5
# Weights to 1e-3 of the largest, as test_cuda.py and test_zero.py: Adam turns
# the rounding noise of a gradient that is zero in exact arithmetic (attention's
# key bias) into whole steps, whatever order each backend sums in.
WEIGHT_RTOL = 1e-3
TIMEOUT = 300


def tools():
    build = os.environ.get("ZINC_BUILD_DIR", "./build")
    bins = [os.path.join(build, "tools", t) for t in ("zinc-compile", "zinc-run")]
    missing = [p for p in bins if not os.access(p, os.X_OK)]
    if missing:
        if "ZINC_BUILD_DIR" in os.environ:
            raise AssertionError("ZINC_BUILD_DIR is set but %s missing" % missing)
        raise unittest.SkipTest("zinc tools not built (%s); set ZINC_BUILD_DIR"
                                % ", ".join(missing))
    return bins


def mpirun(ranks=RANKS):
    exe = shutil.which("mpirun")
    if not exe:
        raise unittest.SkipTest("mpirun is not installed (openmpi-bin)")
    argv = [exe, "--oversubscribe"]
    if os.geteuid() == 0:
        argv.append("--allow-run-as-root")
    return argv + ["-np", str(ranks)]


def mpi_env():
    env = dict(os.environ)
    if "ASAN_OPTIONS" in env:
        env["ASAN_OPTIONS"] += ":detect_leaks=0"
    if os.geteuid() == 0:
        env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    return env


def run(argv, ranks=1):
    if ranks > 1:
        argv = mpirun(ranks) + argv
    return subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          timeout=TIMEOUT, env=mpi_env())


def gpu_count():
    """CUDA devices nvidia-smi lists; 0 without a driver."""
    exe = shutil.which("nvidia-smi")
    if not exe:
        return 0
    proc = subprocess.run([exe, "-L"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                          text=True)
    return sum(1 for line in proc.stdout.splitlines() if line.startswith("GPU "))


def last_line(proc):
    lines = proc.stderr.strip().splitlines()
    return lines[-1] if lines else ""


def read_metrics(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


class CudaZeroTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.zinc_compile, cls.zinc_run = tools()
        keep = os.environ.get("ZINC_E2E_KEEP")
        cls.tmp = os.path.join(keep, "cuda-zero") if keep else tempfile.mkdtemp(
            prefix="zinc-cuda-zero-")
        os.makedirs(cls.tmp, exist_ok=True)
        cls.keep = bool(keep)
        # Each step of the two ranks' data holds both ranks' batches of 4.
        data = safetensors_io.load_file(os.path.join(GPT, "data.safetensors"))
        cls.data2 = cls.path("data-2ranks.safetensors")
        safetensors_io.save_file(
            {k: np.ascontiguousarray(v.reshape(v.shape[0] // RANKS, RANKS * v.shape[1],
                                               *v.shape[2:]))
             for k, v in data.items()}, cls.data2)
        cls.data1 = os.path.join(GPT, "data.safetensors")
        cls.plans = {}

    @classmethod
    def tearDownClass(cls):
        if not cls.keep:
            shutil.rmtree(cls.tmp, ignore_errors=True)

    @classmethod
    def path(cls, name):
        return os.path.join(cls.tmp, name)

    def plan(self, ranks, stage, *flags):
        key = (ranks, stage) + flags
        if key not in self.plans:
            plan = self.path("gpt-r%d-z%d%s.zplan" % (ranks, stage, "".join(
                f.replace("--", "-").replace("=", "") for f in flags)))
            proc = run([self.zinc_compile, os.path.join(GPT, "gpt.onnx"), "-o", plan,
                        "--ranks=%d" % ranks, "--zero-stage=%d" % stage] + list(flags))
            self.assertEqual(proc.returncode, 0, proc.stderr)
            self.plans[key] = plan
        return self.plans[key]

    def need_gpu(self):
        """Skips without a CUDA device (or cuda backend); probed once."""
        cls = type(self)
        if not hasattr(cls, "no_gpu"):
            probe = run([self.zinc_run, self.plan(1, 0), "--backend=cuda", "--steps=1",
                         "--data=" + self.data1])
            cls.no_gpu = None
            if probe.returncode != 0 and ("needs a CUDA device" in probe.stderr
                                          or "built without" in probe.stderr):
                cls.no_gpu = last_line(probe)
            else:
                self.assertEqual(probe.returncode, 0, probe.stderr)
        if cls.no_gpu:
            self.skipTest(cls.no_gpu)

    def train(self, name, plan, backend, ranks, *flags, steps=STEPS, data=None):
        """(metrics, weights) of `plan` on `backend` over `ranks` ranks."""
        metrics = self.path(name + ".jsonl")
        weights = self.path(name + ".safetensors")
        argv = [self.zinc_run, plan, "--backend=" + backend, "--steps=%d" % steps,
                "--data=" + (data or self.data2), "--metrics=" + metrics,
                "--save-weights=" + weights, "--collective-timeout=60"] + list(flags)
        proc = run(argv, ranks)
        self.assertEqual(proc.returncode, 0, "%s failed:\n%s%s" % (
            " ".join(argv), proc.stdout[-2000:], proc.stderr[-4000:]))
        return read_metrics(metrics), safetensors_io.load_file(weights), proc

    def assert_close(self, want, got, what):
        want_metrics, want_weights = want[0], want[1]
        got_metrics, got_weights = got[0], got[1]
        self.assertEqual([m["step"] for m in got_metrics], [m["step"] for m in want_metrics])
        for w, g in zip(want_metrics, got_metrics):
            self.assertLessEqual(abs(g["loss"] - w["loss"]), RTOL * abs(w["loss"]),
                                 "%s: step %d loss %r, cpu %r" % (what, w["step"], g["loss"],
                                                                 w["loss"]))
        self.assertEqual(sorted(got_weights), sorted(want_weights), what)
        for name, w in want_weights.items():
            scale = max(float(np.abs(w).max()), 1e-3)
            self.assertLessEqual(float(np.abs(got_weights[name] - w).max()), WEIGHT_RTOL * scale,
                                 "%s: weight %s" % (what, name))

    # -- refusals, no GPU needed -------------------------------------------

    def test_comm_bad_value_is_refused(self):
        proc = run([self.zinc_run, self.plan(1, 0), "--comm=gloo"])
        self.assertEqual(proc.returncode, 1)
        self.assertEqual(proc.stderr.strip(),
                         "zinc-run: error: --comm: unknown value 'gloo' "
                         "(expected auto, nccl or mpi)")

    def test_comm_nccl_needs_the_cuda_backend(self):
        proc = run([self.zinc_run, self.plan(1, 0), "--comm=nccl"])
        self.assertEqual(proc.returncode, 1)
        self.assertEqual(proc.stderr.strip(),
                         "zinc-run: error: --comm=nccl needs --backend=cuda (the cpu "
                         "backend's ranks exchange over MPI)")

    def test_comm_nccl_in_a_build_without_nccl(self):
        probe = run([self.zinc_run, self.plan(1, 0), "--backend=cuda"])
        if "built without the cuda backend" not in probe.stderr:
            self.skipTest("this zinc-run has the cuda backend, and NCCL with it")
        proc = run([self.zinc_run, self.plan(1, 0), "--backend=cuda", "--comm=nccl"])
        self.assertEqual(proc.returncode, 1)
        self.assertEqual(proc.stderr.strip(),
                         "zinc-run: error: --comm=nccl: this zinc-run was built without "
                         "NCCL (and without the cuda backend); use --backend=cpu, whose "
                         "ranks exchange over MPI")

    # -- with a GPU ---------------------------------------------------------

    def test_stages_staged_over_mpi_match_the_cpu_backend(self):
        self.need_gpu()
        for stage in (1, 2, 3):
            with self.subTest(stage=stage):
                plan = self.plan(RANKS, stage)
                cpu = self.train("cpu-z%d" % stage, plan, "cpu", RANKS)
                cuda = self.train("cuda-z%d" % stage, plan, "cuda", RANKS, "--comm=mpi")
                self.assertIn("collectives over MPI staged through pinned host memory",
                              cuda[2].stderr)
                self.assert_close(cpu, cuda, "stage %d" % stage)
                moved = cuda[0][-1]["bytes"]
                self.assertEqual(moved["allgather"], cpu[0][-1]["bytes"]["allgather"])
                self.assertGreater(moved["allgather"], 0)

    def test_offloaded_states_match_the_cpu_backend(self):
        """The optimizer on the CPU (stage 1) and on NVMe with the parameters
        on the CPU (stage 3): the shards' prefetches and write-backs around
        the staged collectives."""
        self.need_gpu()
        for stage, flags in ((1, ("--offload-optimizer=cpu",)),
                             (3, ("--offload-optimizer=nvme", "--offload-params=cpu"))):
            with self.subTest(stage=stage, flags=flags):
                plan = self.plan(RANKS, stage, *flags)
                runs = []
                for backend in ("cpu", "cuda"):
                    name = "offload-z%d-%s" % (stage, backend)
                    nvme = self.path(name + ".nvme")
                    os.makedirs(nvme, exist_ok=True)
                    runs.append(self.train(name, plan, backend, RANKS, "--nvme-dir=" + nvme,
                                           *(["--comm=mpi"] if backend == "cuda" else [])))
                self.assert_close(runs[0], runs[1], "offloaded stage %d" % stage)

    def test_bf16_ranks_track_fp32(self):
        """bf16 mixed precision at stage 3 on two GPU ranks tracks the fp32
        plan on the cpu backend (bf16 rounding: 5e-2, as test_cuda.py)."""
        self.need_gpu()
        fp32 = self.train("fp32-z3", self.plan(RANKS, 3), "cpu", RANKS)
        bf16 = self.train("bf16-z3", self.plan(RANKS, 3, "--precision=bf16"), "cuda", RANKS,
                          "--comm=mpi")
        for w, g in zip(fp32[0], bf16[0]):
            self.assertLessEqual(abs(g["loss"] - w["loss"]), 5e-2 * abs(w["loss"]),
                                 "step %d: bf16 %r, fp32 %r" % (w["step"], g["loss"],
                                                                w["loss"]))

    def test_checkpoint_of_gpu_ranks_resumes_on_one(self):
        self.need_gpu()
        plan2, plan1 = self.plan(RANKS, 3), self.plan(1, 3)
        dirs = {}
        for backend, flags in (("cpu", []), ("cuda", ["--comm=mpi"])):
            dirs[backend] = self.path("ckpt-" + backend)
            shutil.rmtree(dirs[backend], ignore_errors=True)
            self.train("ckpt-" + backend, plan2, backend, RANKS,
                       "--checkpoint-dir=" + dirs[backend], *flags, steps=2)
        saved = {b: safetensors_io.load_file(os.path.join(d, "step-2", "model.safetensors"))
                 for b, d in dirs.items()}
        self.assert_close(([], saved["cpu"]), ([], saved["cuda"]), "checkpoint")
        resumed = {b: self.train("resumed-" + b, plan1, b, 1, "--resume=" + dirs[b],
                                 data=self.data1)
                   for b in dirs}
        self.assertEqual([m["step"] for m in resumed["cuda"][0]], [2, 3])
        self.assert_close(resumed["cpu"], resumed["cuda"], "resumed on one rank")

    def test_ranks_sharing_a_gpu(self):
        self.need_gpu()
        gpus = gpu_count()
        if gpus >= RANKS:
            self.skipTest("%d GPUs: every rank has its own here" % gpus)
        plan = self.plan(RANKS, 1)
        proc = run([self.zinc_run, plan, "--backend=cuda", "--comm=nccl", "--steps=1",
                    "--data=" + self.data2], RANKS)
        self.assertNotEqual(proc.returncode, 0)
        self.assertIn("--comm=nccl needs a GPU per rank, and the %d ranks on this node "
                      "share %d GPU%s; use --comm=mpi (or --comm=auto)"
                      % (RANKS, gpus, "" if gpus == 1 else "s"), proc.stderr)
        auto = self.train("auto", plan, "cuda", RANKS, steps=1)
        self.assertIn("collectives over MPI staged through pinned host memory (--comm=auto)",
                      auto[2].stderr)


if __name__ == "__main__":
    unittest.main()
