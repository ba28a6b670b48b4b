"""ZeRO collectives in buckets against one tensor each, measured over MPI ranks.

For each ZeRO stage asked (default 1 and 2), in one run:
  1. `zinc-compile` the bundled GPT example for --ranks ranks twice: with
     `--bucket-bytes=0` (every collective moves one tensor) and with the
     bucket size the cost model chooses (the compile note names it);
  2. `mpirun -np RANKS zinc-run` trains each plan --warmup + --steps steps
     with --metrics, the two plans taking turns --reps times; a repetition's
     figure is the median of its timed steps (rank 0's metrics);
  3. the losses of the two plans must agree bit for bit (a bucket is the same
     collectives issued as one group).
Each rank takes the example's batch of 4, so the data file holds RANKS x 4
sequences a step: the example's batches, repeated.

Run: /usr/bin/python3 bench/zero_buckets.py --build-dir build [--stages 1,2]
       [--ranks 2 --reps 3 --warmup 5 --steps 35] [--out bench/results/zero_buckets.json]
"""

import argparse
import datetime
import glob
import json
import os
import shutil
import statistics
import struct
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from checked_run import checked_run  # noqa: E402
from machine_info import cpu_name, git_commit  # noqa: E402


def run(argv):
    return checked_run(argv, "zero_buckets")


def repeat_batch(src, dst, times):
    """A safetensors file whose tensors repeat `src`'s along axis 1 (the batch)."""
    with open(src, "rb") as f:
        blob = f.read()
    (size,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + size])
    data = blob[8 + size:]
    out, chunks, offset = {}, [], 0
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        shape = info["shape"]
        row = (end - begin) // shape[0]  # one step's bytes
        body = b"".join(data[begin + s * row:begin + (s + 1) * row] * times for s in range(shape[0]))
        out[name] = {"dtype": info["dtype"], "shape": [shape[0], shape[1] * times] + shape[2:],
                     "data_offsets": [offset, offset + len(body)]}
        chunks.append(body)
        offset += len(body)
    text = json.dumps(out).encode()
    text += b" " * (-len(text) % 8)
    with open(dst, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(chunks))


def mpirun(ranks):
    argv = [shutil.which("mpirun") or sys.exit("zero_buckets: mpirun not found (openmpi-bin)"),
            "--oversubscribe"]
    if os.geteuid() == 0:
        argv.append("--allow-run-as-root")
    return argv + ["-np", str(ranks)]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build-dir", default=os.path.join(ROOT, "build"))
    ap.add_argument("--model", default=os.path.join(ROOT, "examples", "gpt", "gpt.onnx"))
    ap.add_argument("--data", default=os.path.join(ROOT, "examples", "gpt", "data.safetensors"))
    ap.add_argument("--stages", default="1,2")
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--steps", type=int, default=35)
    ap.add_argument("--out", default=os.path.join(HERE, "results", "zero_buckets.json"))
    args = ap.parse_args(argv)
    tools = os.path.join(args.build_dir, "tools")
    work = tempfile.mkdtemp(prefix="zinc-zero-buckets-")
    data = os.path.join(work, "data.safetensors")
    repeat_batch(args.data, data, args.ranks)
    results = []
    for stage in [int(s) for s in args.stages.split(",")]:
        plans = {}
        for label, flags in (("single", ["--bucket-bytes=0"]), ("buckets", [])):
            plan = os.path.join(work, "zero%d-%s.zplan" % (stage, label))
            report = plan + ".json"
            compiled = run([os.path.join(tools, "zinc-compile"), args.model, "-o", plan,
                            "--report=" + report, "--ranks=%d" % args.ranks,
                            "--zero-stage=%d" % stage] + flags)
            with open(report) as f:
                predicted = json.load(f)["predicted"]["step_seconds"]
            notes = [l.split("note: ", 1)[1] for l in compiled.stderr.splitlines() if "note: placement:" in l]
            plans[label] = {"plan": plan, "predicted_step_seconds": predicted,
                            "placement": notes[0] if notes else None, "medians": [], "losses": None}
        for rep in range(args.reps):
            for label, entry in plans.items():
                metrics = os.path.join(work, "metrics-%d-%s-%d" % (stage, label, rep))
                run(mpirun(args.ranks) + [os.path.join(tools, "zinc-run"), entry["plan"],
                                          "--steps=%d" % (args.warmup + args.steps),
                                          "--data=" + data, "--metrics=" + metrics + ".jsonl"])
                # Rank 0's file: the name as given, or with its rank added.
                path = sorted(glob.glob(metrics + "*"))[0]
                with open(path) as f:
                    lines = [json.loads(l) for l in f if l.strip()]
                entry["medians"].append(statistics.median(l["seconds"] for l in lines[args.warmup:]))
                entry["losses"] = [l.get("loss") for l in lines]
        if plans["single"]["losses"] != plans["buckets"]["losses"]:
            sys.exit("zero_buckets: stage %d: the bucketed plan trained differently" % stage)
        single = statistics.median(plans["single"]["medians"])
        bucketed = statistics.median(plans["buckets"]["medians"])
        results.append({"stage": stage, "single_step_seconds": single,
                        "bucketed_step_seconds": bucketed, "speedup": single / bucketed,
                        "plans": {k: {x: v[x] for x in ("predicted_step_seconds", "placement", "medians")}
                                  for k, v in plans.items()}})
        print("stage %d, %d ranks: one tensor a collective %.3f ms, buckets %.3f ms (%.2fx); "
              "predicted %.3f -> %.3f ms; %s" % (
                  stage, args.ranks, single * 1e3, bucketed * 1e3, single / bucketed,
                  plans["single"]["predicted_step_seconds"] * 1e3,
                  plans["buckets"]["predicted_step_seconds"] * 1e3, plans["buckets"]["placement"]))
    shutil.rmtree(work, ignore_errors=True)
    out = {"benchmark": "zero_buckets", "date": datetime.datetime.now().isoformat(),
           "machine": cpu_name(), "commit": git_commit(), "ranks": args.ranks,
           "model": os.path.relpath(args.model, ROOT), "results": results}
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(out, f, indent=2)
    print("wrote", args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
