"""End-to-end: the cost model's predicted step, in the report and as a trace.

The bundled GPT (gpt.onnx), compiled with `make run`'s placement (AdamW states and master
weights on NVMe, parameters on the CPU), on this machine's description:

  - the report's `predicted` gives a step time no shorter than its lower
    bound (the busiest stream), an overlap efficiency in (0, 1] and the
    bottleneck, the same numbers as the trace's;
  - `zinc-dump --format=trace` is valid Chrome trace event JSON (checked by
    test/lib/trace_format.py), one track per stream as zinc-run's measured
    --trace has them, with transfers labelled by tensor and bytes, flows for
    the events between streams, and prefetches overlapping compute;
  - with the instruction-count model the predicted step is the plan's
    critical path in instructions, at most the instruction count;
  - zinc-dump --format=svg draws memory per tier stacked by what it holds
    over the step, above the streams' timeline (well-formed SVG);
  - zinc-run --trace on the same plan passes the same checker, with the same
    stream tracks (copies the nvme lane keeps in flight together on tracks
    of their own below the stream's);
  - a preset and its documented JSON file (hw/) compile to the same
    prediction, and ZeRO ranks on a DGX-2 predict collective time.

Run: ZINC_BUILD_DIR=/path/to/build /usr/bin/python3 -m unittest discover -s test/e2e -p test_predicted_timeline.py
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "test", "lib"))
from harness import run_tool, tools  # noqa: E402
from trace_format import check_trace  # noqa: E402

MODEL = os.path.join(ROOT, "examples", "gpt", "gpt.onnx")
DATA = os.path.join(ROOT, "examples", "gpt", "data.safetensors")


def overlaps(a, b):
    return a["ts"] < b["ts"] + b["dur"] and b["ts"] < a["ts"] + a["dur"]


class PredictedTimelineTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.zinc_compile, cls.zinc_run = tools()
        cls.zinc_dump = os.path.join(os.path.dirname(cls.zinc_compile), "zinc-dump")
        cls.tmp = tempfile.mkdtemp(prefix="zinc-predicted-")
        cls.plan, cls.report = cls.compile("offload", "--offload-optimizer=nvme",
                                           "--offload-params=cpu")
        cls.offload_stderr = cls.stderr

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    @classmethod
    def compile(cls, name, *flags):
        plan = os.path.join(cls.tmp, name + ".zplan")
        report = os.path.join(cls.tmp, name + ".json")
        proc = run_tool([cls.zinc_compile, MODEL, "-o", plan, "--report=" + report] + list(flags))
        cls.stderr = proc.stderr.decode()
        with open(report) as f:
            return plan, json.load(f)

    def dump_trace(self, plan, *flags):
        proc = run_tool([self.zinc_dump, plan, "--format=trace"] + list(flags))
        doc = json.loads(proc.stdout)
        self.assertEqual(check_trace(doc), [])
        return doc

    def test_report_predicts_the_step(self):
        p = self.report["predicted"]
        self.assertGreater(p["lower_bound_seconds"], 0)
        self.assertGreaterEqual(p["step_seconds"], p["lower_bound_seconds"])
        self.assertAlmostEqual(p["overlap_efficiency"],
                               p["lower_bound_seconds"] / p["step_seconds"])
        self.assertEqual(p["lower_bound_seconds"], max(p["busy_seconds"].values()))
        self.assertEqual(p["busy_seconds"][p["bottleneck"]], p["lower_bound_seconds"])
        self.assertGreater(p["busy_seconds"]["nvme"], 0)
        self.assertGreater(p["busy_seconds"]["host"], 0)

    def test_trace_shows_streams_transfers_and_overlap(self):
        doc = self.dump_trace(self.plan)
        self.assertEqual(doc["otherData"]["predicted"], self.report["predicted"])
        events = doc["traceEvents"]
        tracks = {e["tid"]: e["args"]["name"] for e in events if e["name"] == "thread_name"}
        self.assertEqual(set(tracks.values()), {"compute", "h2d", "d2h", "nvme", "host"})
        by_track = {}
        for e in events:
            if e["ph"] == "X":
                by_track.setdefault(tracks[e["tid"]], []).append(e)
        fetch = by_track["h2d"][0]
        self.assertRegex(fetch["name"], r"^Copy \S+ \([0-9.]+ (B|KiB|MiB)\)$")
        self.assertGreater(fetch["args"]["bytes"], 0)
        self.assertTrue(any(e["ph"] == "f" for e in events), "no flow arrows for events")
        # Prefetches run while compute works: some h2d copy overlaps a kernel.
        self.assertTrue(any(overlaps(c, k) for c in by_track["h2d"] for k in by_track["compute"]))
        # The trace ends where the predicted step does.
        end = max(e["ts"] + e["dur"] for e in events if e["ph"] == "X")
        self.assertAlmostEqual(end, self.report["predicted"]["step_seconds"] * 1e6, places=2)

    def test_instruction_count_model_is_the_critical_path(self):
        doc = self.dump_trace(self.plan, "--cost-model=instructions")
        spans = [e for e in doc["traceEvents"] if e["ph"] == "X"]
        self.assertTrue(all(abs(e["dur"] - 1.0) < 1e-9 for e in spans))
        step = doc["otherData"]["predicted"]["step_seconds"]
        # Whole microseconds, fewer than the instructions: streams overlap.
        self.assertAlmostEqual(step * 1e6, round(step * 1e6), places=6)
        self.assertLess(step * 1e6, len(spans))
        busiest = max(doc["otherData"]["predicted"]["busy_seconds"].values())
        self.assertGreaterEqual(step, busiest)

    def test_measured_trace_has_the_same_tracks(self):
        measured = os.path.join(self.tmp, "measured.json")
        nvme = os.path.join(self.tmp, "nvme")
        os.makedirs(nvme, exist_ok=True)
        run_tool([self.zinc_run, self.plan, "--steps=2", "--data=" + DATA, "--nvme-dir=" + nvme,
                  "--trace=" + measured])
        with open(measured) as f:
            doc = json.load(f)
        self.assertEqual(check_trace(doc), [])
        names = lambda d: {e["args"]["name"] for e in d["traceEvents"] if e["name"] == "thread_name"}
        # Copies the nvme lane keeps in flight together are drawn on tracks
        # of their own below the stream's ("nvme (2)", ...): check_trace
        # above refuses overlapping events on one track.
        streams = {n.split(" (")[0] for n in names(doc)}
        self.assertEqual(streams, names(self.dump_trace(self.plan)))

    def test_summary_line(self):
        self.assertRegex(self.offload_stderr, r"zinc-compile: note: plan: gpu [0-9.]+ \w+ of [0-9.]+ \w+, "
                                      r"cpu .*; predicted step [0-9.]+ \w+ \(lower bound "
                                      r"[0-9.]+ \w+, \w+-bound\), overlap efficiency [01]\.\d\d, "
                                      r"model FLOPs utilization [01]\.\d\d\d; "
                                      r"per step: h2d .*nvme read .*nvme write")

    def test_preset_and_its_json_file_agree(self):
        _, preset = self.compile("v100", "--hw=dgx2-v100")
        _, described = self.compile("v100-file", "--hw=" + os.path.join(ROOT, "hw",
                                                                         "dgx2-v100.json"))
        self.assertEqual(preset["predicted"], described["predicted"])
        self.assertEqual(preset["per_rank"]["tiers"], described["per_rank"]["tiers"])
        # Every field of every preset names its source.
        for name in os.listdir(os.path.join(ROOT, "hw")):
            with open(os.path.join(ROOT, "hw", name)) as f:
                desc = json.load(f)
            fields = set(desc) - {"name", "description", "sources"}
            self.assertEqual(fields, set(desc["sources"]), name)

    def test_zero_ranks_predict_collectives(self):
        _, rep = self.compile("zero3", "--hw=dgx2-v100", "--ranks=16", "--zero-stage=3",
                              "--dim", "batch=1")
        self.assertGreater(rep["predicted"]["busy_seconds"]["collective"], 0)

    def test_svg_picture_of_memory_and_streams(self):
        import xml.etree.ElementTree as ET
        proc = run_tool([self.zinc_dump, self.plan, "--format=svg"])
        root = ET.fromstring(proc.stdout)
        self.assertEqual(root.tag, "{http://www.w3.org/2000/svg}svg")
        text = " ".join(t.text or "" for t in root.iter("{http://www.w3.org/2000/svg}text"))
        for tier in ("GPU tier", "CPU tier", "NVMe tier"):
            self.assertIn(tier, text)
        for stream in ("compute", "h2d", "d2h", "nvme", "host"):
            self.assertRegex(text, stream + r" \(\d+% busy\)")
        # The bands stacked under each tier's peak are titled by what they hold.
        bands = {t.text for t in root.iter("{http://www.w3.org/2000/svg}title")}
        self.assertTrue({"parameters", "gradients", "optimizer states", "activations"} <= bands,
                        bands)
        self.assertIn("overlap efficiency", text)

    def test_dump_errors(self):
        for flags, message in ((["--format=png"], "--format must be text, json, trace or svg, "
                                                   "not 'png'"),
                               (["--format=trace", "--cost-model=magic"],
                                "--cost-model must be hardware or instructions, not 'magic'")):
            proc = subprocess.run([self.zinc_dump, self.plan] + flags, capture_output=True,
                                  text=True)
            self.assertEqual(proc.returncode, 1)
            self.assertIn("zinc-dump: error: " + message, proc.stderr)


if __name__ == "__main__":
    unittest.main()
