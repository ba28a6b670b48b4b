#!/usr/bin/env python3
"""Sequential NVMe-tier throughput: zinc-bench-nvme vs DeepSpeed's aio and fio, same parameters.

For each repetition: zinc-bench-nvme writes then reads --size bytes through an
NvmeTier (libaio, O_DIRECT, --block-size blocks, --queue-depth in flight) after
one untimed loop, so the timed writes overwrite the file as DeepSpeed's do;
then DeepSpeed's aio_handle does the same (bench/deepspeed_ops.py, with
--ds-python from bench/setup_deepspeed.sh); then fio with --ioengine=libaio
--direct=1 (an untimed write first, for the same reason). The repetitions
alternate so drifting load hits all three. Reported: the median GB/s (1e9
bytes/s) of each and the ratios zinc/DeepSpeed and zinc/fio. See bench/README.md.
"""
import argparse
import datetime
import json
import os
import shutil
import statistics
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def parse_size(text):
    units = {"": 1, "b": 1, "k": 1 << 10, "kib": 1 << 10, "m": 1 << 20, "mib": 1 << 20,
             "g": 1 << 30, "gib": 1 << 30, "kb": 10**3, "mb": 10**6, "gb": 10**9}
    t = text.strip().lower()
    i = len(t)
    while i > 0 and t[i - 1].isalpha():
        i -= 1
    if t[i:] not in units:
        raise argparse.ArgumentTypeError(f"bad size '{text}'")
    return int(float(t[:i]) * units[t[i:]])


def fs_type(path):
    out = subprocess.run(["stat", "-f", "-c", "%T", path], capture_output=True, text=True)
    return out.stdout.strip() if out.returncode == 0 else "unknown"


def drop_caches():
    """True if the page cache was dropped (needs root and a writable /proc)."""
    try:
        os.sync()
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        return True
    except OSError:
        return False


def run_zinc(exe, args, directory):
    cmd = [exe, f"--dir={directory}", f"--size={args.size}", f"--block-size={args.block_size}",
           f"--queue-depth={args.queue_depth}", f"--chunk={args.chunk}", "--warmup=1", "--loops=1"]
    if args.small_pages:
        cmd.append("--small-pages")
    if args.drop_caches:
        cmd.append("--drop-caches")
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"nvme_io.py: {' '.join(cmd)} failed:\n{out.stderr}")
    if out.stderr:
        sys.stderr.write(out.stderr)
    return json.loads(out.stdout), cmd


def run_deepspeed(python, args, directory):
    cmd = [python, os.path.join(REPO, "bench", "deepspeed_ops.py"), "aio", f"--dir={directory}",
           f"--size={args.size}", f"--block-size={args.block_size}",
           f"--queue-depth={args.queue_depth}", "--warmup=1", "--loops=1"]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"nvme_io.py: {' '.join(cmd)} failed:\n{out.stderr[-4000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1]), cmd


def run_fio(fio, args, path, rw):
    cmd = [fio, f"--name=zinc-{rw}", "--ioengine=libaio", "--direct=1", f"--bs={args.block_size}",
           f"--iodepth={args.queue_depth}", f"--rw={rw}", f"--size={args.size}",
           f"--filename={path}", "--numjobs=1", "--thread", "--output-format=json"]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"nvme_io.py: {' '.join(cmd)} failed:\n{out.stderr}{out.stdout}")
    # fio may print notes before the JSON object.
    text = out.stdout[out.stdout.index("{"):]
    job = json.loads(text)["jobs"][0]
    side = job["write" if rw == "write" else "read"]
    if side["io_bytes"] != args.size:
        sys.exit(f"nvme_io.py: fio moved {side['io_bytes']} bytes, expected {args.size}")
    return side["bw_bytes"] / 1e9, cmd


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--build-dir", default=os.path.join(REPO, "build"))
    p.add_argument("--dir", default="/var/tmp/zinc-bench-nvme",
                   help="directory of the tier file and fio's file (not tmpfs)")
    p.add_argument("--size", default="1GiB")
    p.add_argument("--block-size", default="1MiB")
    p.add_argument("--queue-depth", type=int, default=32)
    p.add_argument("--chunk", default="0",
                   help="bytes per zinc request (default 0: one request for the whole size)")
    p.add_argument("--ds-python", default=os.environ.get("DS_PYTHON", ""),
                   help="python of the venv bench/setup_deepspeed.sh made; empty: no DeepSpeed")
    p.add_argument("--small-pages", action="store_true",
                   help="zinc's buffer without huge pages (what they gain: bench/README.md)")
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--no-drop-caches", dest="drop_caches", action="store_false")
    p.add_argument("--out", default=os.path.join(REPO, "bench", "results", "nvme_io.json"))
    args = p.parse_args()
    args.size = parse_size(args.size)
    args.block_size = parse_size(args.block_size)

    exe = os.path.join(args.build_dir, "bench", "zinc-bench-nvme")
    if not os.access(exe, os.X_OK):
        sys.exit(f"nvme_io.py: {exe} not found; build the zinc-bench-nvme target")
    fio = shutil.which("fio")
    if not fio:
        sys.exit("nvme_io.py: fio not found (apt-get install fio, or scripts/install-deps.sh)")
    os.makedirs(args.dir, exist_ok=True)
    fstype = fs_type(args.dir)
    if fstype in ("tmpfs", "ramfs"):
        print(f"nvme_io.py: warning: {args.dir} is {fstype}: this measures memory, not a disk",
              file=sys.stderr)
    fio_file = os.path.join(args.dir, "fio-seq.dat")

    if args.ds_python and not os.access(args.ds_python, os.X_OK):
        sys.exit(f"nvme_io.py: --ds-python {args.ds_python} is not executable "
                 "(bash bench/setup_deepspeed.sh makes it)")
    sides = ["zinc", "fio"] + (["ds"] if args.ds_python else [])
    reps = []
    zinc_cmd = fio_cmds = ds_cmd = None
    for r in range(args.reps):
        z, zinc_cmd = run_zinc(exe, args, args.dir)
        rep = {"zinc_write_gbps": z["write_gbps"], "zinc_read_gbps": z["read_gbps"],
               "zinc_first_write_gbps": z["first_write_gbps"], "zinc_direct": z["direct"],
               "zinc_caches_dropped": z["caches_dropped"]}
        line = f"rep {r}: zinc write {z['write_gbps']:.3f} read {z['read_gbps']:.3f} GB/s"
        if args.ds_python:
            d, ds_cmd = run_deepspeed(args.ds_python, args, args.dir)
            rep.update({"ds_write_gbps": d["write_gbps"], "ds_read_gbps": d["read_gbps"]})
            line += f" | DeepSpeed write {d['write_gbps']:.3f} read {d['read_gbps']:.3f} GB/s"
        if os.path.exists(fio_file):
            os.unlink(fio_file)
        run_fio(fio, args, fio_file, "write")  # allocates the file; the timed write overwrites
        fw, fio_write_cmd = run_fio(fio, args, fio_file, "write")
        dropped = args.drop_caches and drop_caches()
        fr, fio_read_cmd = run_fio(fio, args, fio_file, "read")
        fio_cmds = [fio_write_cmd, fio_read_cmd]
        rep.update({"fio_write_gbps": fw, "fio_read_gbps": fr, "fio_caches_dropped": dropped})
        reps.append(rep)
        print(line + f" | fio write {fw:.3f} read {fr:.3f} GB/s", file=sys.stderr)
    if os.path.exists(fio_file):
        os.unlink(fio_file)

    med = {f"{side}_{kind}_gbps": statistics.median(rep[f"{side}_{kind}_gbps"] for rep in reps)
           for side in sides for kind in ("write", "read")}
    result = {
        "config": {"dir": args.dir, "fs_type": fstype, "bytes": args.size,
                   "block_bytes": args.block_size, "queue_depth": args.queue_depth,
                   "zinc_request_bytes": parse_size(args.chunk), "reps": args.reps},
        "median": med,
        "ratio": {f"zinc_over_{side}_{kind}": med[f"zinc_{kind}_gbps"] / med[f"{side}_{kind}_gbps"]
                  for side in sides[1:] for kind in ("write", "read")},
        "reps": reps,
        "commands": {"zinc": zinc_cmd, "fio": fio_cmds, "deepspeed": ds_cmd},
        "fio_version": subprocess.run([fio, "--version"], capture_output=True,
                                      text=True).stdout.strip(),
        "commit": subprocess.run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"],
                                 capture_output=True, text=True).stdout.strip(),
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
    }
    names = {"zinc": "zinc", "ds": "DeepSpeed", "fio": "fio"}
    order = ["zinc"] + [s for s in ("ds", "fio") if s in sides]
    print(f"{'':8}" + "".join(f"{names[s] + ' GB/s':>16}" for s in order)
          + "".join(f"{'zinc/' + names[s]:>16}" for s in order[1:]))
    for kind in ("write", "read"):
        print(f"{kind:8}" + "".join(f"{med[f'{s}_{kind}_gbps']:16.3f}" for s in order)
              + "".join(f"{result['ratio'][f'zinc_over_{s}_{kind}']:16.3f}" for s in order[1:]))
    print(f"({args.size} bytes, block {args.block_size}, queue depth {args.queue_depth}, "
          f"{args.reps} reps, median; {args.dir} on {fstype})")
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(result, f, indent=2)
        f.write("\n")
    print(f"JSON: {args.out}")


if __name__ == "__main__":
    main()
