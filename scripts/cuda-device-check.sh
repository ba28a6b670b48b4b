#!/bin/bash
# The cuda backend's checks and benchmarks on a GPU machine in ONE call of the
# device tool (10 minutes a call, 15 minutes of device time a session, the
# machine's start-up included), from binaries built elsewhere (GPU machines
# lent for minutes have no LLVM or protobuf to build zinc with):
#
#   scripts/make-device-pack.sh            # here: builds PACK/pack.tar.xz
#   scripts/cuda-device-check.sh [PACK]    # there: this script
#   scripts/cuda-device-check.sh --check   # anywhere: the stage table's sum
#
# Stages, most important first, each under its own limit (the table below;
# the limits of the stages run add up to at most BUDGET = 480 s, which this
# script asserts before it starts). Each stage runs in a process group of its
# own (setsid); on its limit the whole group gets SIGTERM, then SIGKILL 5 s
# later, so a hung child of a stage (a python's zinc-run, a compute-sanitizer
# target) dies with it. A stage that would end past the budget is skipped.
# Every figure lands as JSON under $OUT (default ./device-out): STAGE.json
# from the stage itself, and stages.jsonl, one line per stage (exit, seconds,
# limit, timed out or skipped); logs as STAGE.log.
#
#   calibrate      zinc-run --calibrate --backend=cuda --nvme-dir: hw.json,
#                  the description every zinc case below compiles against
#   unit           zinc-unit-cuda, one process per suite: every cuda kernel
#                  against its cpu kernel
#   big-cpu        the big model (shape-only GPT, BIG_* below: 28 x 4096,
#                  seq 2048, ~6B parameters, bf16, AdamW), its model states
#                  over GPU_MEM (80 GB, an H100's) >= 1.2x, compiled here
#                  against hw.json with the optimizer on the CPU,
#                  zinc-run --init=random, 1 warm-up + 4 timed steps
#   fsdp2          PyTorch FSDP2 fully_shard, CPUOffloadPolicy(pin_memory),
#                  bf16 MixedPrecisionPolicy, world size 1, SDPA: same model,
#                  same batch
#   unlimited      the same width at 2 and 4 layers resident in PyTorch (SDPA,
#                  fused AdamW, autocast): step = a + b * layers at BIG_LAYERS
#   big-dpu        big-cpu with --dpu
#   resident-zinc  a 1.3B GPT (24 x 2048, seq 2048) all on the GPU, bf16
#   resident-torch the same in PyTorch eager: SDPA flash, fused AdamW, autocast
#   attention      SDPA flash forward+backward at T=2048, head dims 64 and
#                  128, bf16; zinc's side through zinc-bench-cuda's attention
#                  mode when the pack's binary has one (a JSON note if not)
#   big-nvme       a ~2B GPT (24 x 2560) with the optimizer on NVMe
#   e2e            test/e2e/test_cuda.py: bf16 GPT and the offloaded peak
#   ceilings       zinc-bench-cuda: GEMM vs cuBLAS, copies vs cudaMemcpyAsync
#   memcheck       compute-sanitizer on two offloaded steps of the bundled GPT
#   zero-mpi       (not in the default list: the default's limits fill the
#                  budget) test/e2e/test_cuda_zero.py: two ranks under the
#                  pack's mpirun (scripts/pack-openmpi.sh) sharing the GPU,
#                  --backend=cuda --comm=mpi on the bundled GPT at ZeRO
#                  stages 1-3 against the cpu backend under mpirun (losses
#                  within 1e-5, weights 1e-3), offloaded to the CPU and to
#                  NVMe, bf16 tracking fp32, a 2-rank GPU checkpoint resumed
#                  on one rank, --comm=nccl refused and --comm=auto staging
#                  where the ranks share a GPU: STAGES=zero-mpi, alone or
#                  after calibrate and unit in a call of its own
#   compare        (not in the default list) scripts/compare-backends.py on
#                  the carried convnets, for chasing a mismatch
#   train          (not in the default list) bench/cuda_train_gpt.py run
#                  PACK/gpt2s: the 98M nanoGPT's step vs PyTorch eager
#
# STAGES picks and orders them (default: the table's order, compare aside).
# The big model's size: BIG_LAYERS, BIG_D, BIG_HEADS, BIG_SEQ, BIG_BATCH;
# GPU_MEM: the GPU budget zinc's plans get (--gpu-mem) and PyTorch's
# allocator is capped at (its fraction of the device).
set -u
BUDGET=480
# name limit_seconds, most important first.
STAGE_TABLE="
calibrate 25
unit 40
big-cpu 90
fsdp2 70
unlimited 30
big-dpu 50
resident-zinc 25
resident-torch 20
attention 15
big-nvme 60
e2e 25
ceilings 15
memcheck 15
"
# Stages that run only when STAGES names them; never in the default sum.
EXTRA_TABLE="
zero-mpi 150
compare 90
train 140
"
DEFAULT_STAGES=$(echo "$STAGE_TABLE" | awk 'NF == 2 {printf "%s ", $1}')
STAGES=${STAGES:-$DEFAULT_STAGES}

limit_of() {
  echo "$STAGE_TABLE$EXTRA_TABLE" | awk -v s="$1" 'NF == 2 && $1 == s {print $2; exit}'
}

# The limits of STAGES, summed; an unknown stage is an error.
stage_sum() {
  local total=0 s l
  for s in $STAGES; do
    l=$(limit_of "$s")
    if [ -z "$l" ]; then
      echo "cuda-device-check: unknown stage '$s'" >&2
      return 1
    fi
    total=$((total + l))
  done
  echo $total
}

total=$(stage_sum) || exit 2
if [ "$total" -gt "$BUDGET" ]; then
  echo "cuda-device-check: the stages' limits add up to $total s, over the budget of $BUDGET s" >&2
  exit 2
fi
if [ "${1:-}" = "--check" ]; then
  echo "stages: $STAGES"
  echo "limits: $total s of $BUDGET s"
  exit 0
fi

# Runs "$@" as stage $1 with limit $2 in a session (and process group) of its
# own, and kills that whole group when the limit passes.
run_stage() {
  local name=$1 limit=$2
  shift 2
  local t0 now left rc timed_out=false
  t0=$(date +%s)
  left=$((START + BUDGET - t0))
  if [ "$left" -lt "$limit" ]; then
    echo "== $name: skipped, $left s of the budget left for a limit of $limit s"
    printf '{"stage": "%s", "limit_s": %d, "skipped": "%d s of the %d s budget left"}\n' \
      "$name" "$limit" "$left" "$BUDGET" >>"$OUT/stages.jsonl"
    return 0
  fi
  # A background job of a script is not a group leader, so setsid makes the
  # new session in this very process: $! is the group's id.
  setsid "$@" >"$OUT/$name.log" 2>&1 </dev/null &
  local pid=$!
  setsid bash -c "sleep $limit; kill -TERM -- -$pid 2>/dev/null; sleep 5; kill -KILL -- -$pid 2>/dev/null" \
    >/dev/null 2>&1 </dev/null &
  local watchdog=$!
  wait $pid
  rc=$?
  now=$(date +%s)
  if [ $((now - t0)) -ge "$limit" ]; then
    timed_out=true
  fi
  kill -KILL -- -$watchdog 2>/dev/null
  wait $watchdog 2>/dev/null
  # Whatever the stage left running in its group goes too.
  kill -KILL -- -$pid 2>/dev/null
  echo "== $name: exit $rc, $((now - t0)) s of $limit s$($timed_out && echo ', TIMED OUT')"
  printf '{"stage": "%s", "limit_s": %d, "seconds": %d, "exit": %d, "timed_out": %s}\n' \
    "$name" "$limit" $((now - t0)) "$rc" "$timed_out" >>"$OUT/stages.jsonl"
  grep -E "${FILTER:-.}" "$OUT/$name.log" | tail -n "${LINES_SHOWN:-12}"
}

if [ "${1:-}" = "--selftest" ]; then
  # The watchdog on a stage whose child outlives the limit: both die.
  OUT=$(mktemp -d)
  START=$(date +%s)
  BUDGET=60
  run_stage hang 2 bash -c 'sleep 300 & echo child $!; sleep 300'
  child=$(awk '/^child/ {print $2}' "$OUT/hang.log")
  sleep 1
  # Dead, or a zombie no one has reaped yet (its parent died with it).
  if [ -z "$child" ] || ps -o stat= -p "$child" 2>/dev/null | grep -qv '^Z'; then
    echo "selftest: the stage's child $child survived its group's kill"
    exit 1
  fi
  grep -q '"timed_out": true' "$OUT/stages.jsonl" || { echo "selftest: no timeout recorded"; exit 1; }
  rm -rf "$OUT"
  echo "selftest: ok"
  exit 0
fi

PACK=${1:-.devpack}
OUT=${OUT:-$PWD/device-out}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
START=$(date +%s)
mkdir -p "$OUT"
: >"$OUT/stages.jsonl"
Z=/tmp/zinc-pack
rm -rf $Z && mkdir -p $Z && tar xJf "$PACK/pack.tar.xz" -C $Z || exit 1

# The machine's own CUDA libraries (cuBLAS, NCCL): the toolkit's, or those
# of the Python wheels.
libs=$Z/lib
for d in /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda/targets/x86_64-linux/lib \
         $(python3 -c 'import nvidia, os; print(" ".join(os.path.join(p, d, "lib") for p in nvidia.__path__ for d in os.listdir(p)))' 2>/dev/null); do
  if [ -e "$d/libcublasLt.so.13" ] || [ -e "$d/libnccl.so.2" ] || [ -e "$d/libcublas.so.13" ]; then
    libs=$libs:$d
  fi
done
export LD_LIBRARY_PATH=$libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export ZINC_BUILD_DIR=$Z/build PYTHONUNBUFFERED=1
# The models exported where the pack was made (test/e2e/training_exports.py).
[ -d "$PACK/exports" ] && export ZINC_E2E_EXPORTS=$(cd "$PACK/exports" && pwd)
nvidia-smi -L
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader >"$OUT/device.txt" 2>&1
missing=$(ldd $Z/build/tools/zinc-run | grep "not found")
[ -n "$missing" ] && echo "missing libraries: $missing"

BIG_LAYERS=${BIG_LAYERS:-28} BIG_D=${BIG_D:-4096} BIG_HEADS=${BIG_HEADS:-32}
BIG_SEQ=${BIG_SEQ:-2048} BIG_BATCH=${BIG_BATCH:-4}
GPU_MEM=${GPU_MEM:-80GB}
W=/tmp/zinc-device-work
rm -rf $W && mkdir -p $W/nvme
export Z OUT ROOT W
# The GPU's share PyTorch's allocator gets: GPU_MEM of the device's total.
GPU_FRACTION=$(python3 -c "
import sys, torch
units = {'KB': 1e3, 'MB': 1e6, 'GB': 1e9, 'TB': 1e12, 'KiB': 2**10, 'MiB': 2**20, 'GiB': 2**30}
s = sys.argv[1]
u = next((u for u in sorted(units, key=len, reverse=True) if s.endswith(u)), None)
b = float(s[:-len(u)]) * units[u] if u else float(s)
print('%.4f' % min(1.0, b / torch.cuda.get_device_properties(0).total_memory))" "$GPU_MEM" 2>/dev/null || echo 1.0)

HW=$W/hw.json
zinc_case() { # name, then zinc_gpu_case.py's flags
  local name=$1
  shift
  python3 "$ROOT/bench/zinc_gpu_case.py" --name "$name" --build-dir $Z/build --hw "$(cat $W/hw-choice)" \
    --work "$W/$name" --out "$OUT/$name.json" "$@"
}
big_flags="--layers $BIG_LAYERS --d-model $BIG_D --heads $BIG_HEADS --seq $BIG_SEQ --batch $BIG_BATCH"
# Until calibrate has written hw.json, the H100 preset with this GPU's budget.
echo h100-sxm >$W/hw-choice

calibrate_stage() {
  $Z/build/tools/zinc-run --calibrate --backend=cuda --nvme-dir=$W/nvme >$W/hw.json.tmp &&
    mv $W/hw.json.tmp $W/hw.json && cp $W/hw.json "$OUT/hw.json"
}

unit_suites() {
  # One process per suite: a kernel fault is sticky for its CUDA context,
  # and would otherwise fail every test after it.
  local bin=$Z/build/test/zinc-unit-cuda
  for suite in $($bin --gtest_list_tests | grep -E '^[A-Za-z0-9_]+\.$' | tr -d .); do
    echo "-- $suite"
    timeout 20 $bin --gtest_filter="$suite.*" --gtest_brief=1 \
      --gtest_output=json:"$OUT/unit-$suite.tmp.json" >"$W/unit-suite.log" 2>&1
    echo "exit $?"
    cat "$W/unit-suite.log" >>"$OUT/unit-failures.log"
    grep -E "FAILED  \]|PASSED|differ|error" "$W/unit-suite.log" | head -12
  done
  # One JSON: suite -> tests, failures.
  python3 - "$OUT" <<'EOF'
import glob, json, os, sys
out, suites = sys.argv[1], {}
for path in sorted(glob.glob(os.path.join(out, "unit-*.tmp.json"))):
    try:
        d = json.load(open(path))
        for s in d.get("testsuites", []):
            suites[s["name"]] = {"tests": s.get("tests"), "failures": s.get("failures"),
                                 "disabled": s.get("disabled")}
    except ValueError:
        pass
    os.remove(path)
json.dump({"suites": suites, "tests": sum(s["tests"] or 0 for s in suites.values()),
           "failures": sum(s["failures"] or 0 for s in suites.values())},
          open(os.path.join(out, "unit.json"), "w"), indent=1)
EOF
}

attention_stage() {
  python3 "$ROOT/bench/gpu_baselines.py" attention --seq 2048 --head-dims 64,128 \
    --out "$OUT/attention-torch.json"
  # zinc's side: the bench binary's attention mode, once it has one.
  if $Z/build/bench/zinc-bench-cuda --help 2>&1 | grep -q attention; then
    $Z/build/bench/zinc-bench-cuda --reps 20 attention >"$W/attention-zinc.jsonl"
    python3 -c "
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith('{')]
json.dump({'rows': rows}, open(sys.argv[2], 'w'), indent=1)" "$W/attention-zinc.jsonl" "$OUT/attention-zinc.json"
  else
    echo '{"skipped": "zinc-bench-cuda in this pack has no attention mode (zinc.Attention not benchmarked yet)"}' \
      >"$OUT/attention-zinc.json"
  fi
}

memcheck_stage() {
  $Z/build/tools/zinc-compile "$ROOT/examples/gpt/gpt.onnx" --mode=train --optimizer=adamw \
    --offload-optimizer=nvme --offload-params=cpu -o $W/memcheck.zplan >/dev/null 2>&1
  mkdir -p $W/memcheck-nvme
  compute-sanitizer --tool memcheck --leak-check no \
    $Z/build/tools/zinc-run $W/memcheck.zplan --backend=cuda --steps=2 --nvme-dir=$W/memcheck-nvme
  local rc=$?
  python3 -c "
import json, re, sys
text = open(sys.argv[1]).read()
m = re.search(r'ERROR SUMMARY: (\d+) error', text)
json.dump({'errors': int(m.group(1)) if m else None, 'exit': int(sys.argv[2])},
          open(sys.argv[3], 'w'))" "$OUT/memcheck.log" $rc "$OUT/memcheck.json"
  return $rc
}

compare_stage() {
  for m in resnet18 mobilenet_v2; do
    python3 "$ROOT/scripts/compare-backends.py" \
      "$ZINC_E2E_EXPORTS/$m.onnx.xz" --data "$ZINC_E2E_EXPORTS/$m.safetensors" \
      --steps 1 --top 25 -- --dim batch=8 --optimizer=sgd --lr=1
  done
}

zero_mpi_stage() {
  # The pack's Open MPI, relocated; root may start ranks.
  if [ ! -x $Z/ompi/bin/mpirun ]; then
    echo '{"skipped": "the pack holds no Open MPI (scripts/pack-openmpi.sh)"}' >"$OUT/zero-mpi.json"
    return 1
  fi
  . "$ROOT/scripts/pack-openmpi.sh" --env $Z
  mpirun --version | head -1
  (cd "$ROOT/test/e2e" && python3 -m unittest -v test_cuda_zero) >$W/zero-mpi.log 2>&1
  local rc=$?
  cat $W/zero-mpi.log
  python3 "$ROOT/scripts/unittest-summary.py" $W/zero-mpi.log $rc >"$OUT/zero-mpi.json"
  return $rc
}

export -f zinc_case calibrate_stage zero_mpi_stage unit_suites attention_stage memcheck_stage compare_stage
export big_flags GPU_MEM GPU_FRACTION HW

for s in $STAGES; do
  limit=$(limit_of "$s")
  FILTER='.'
  LINES_SHOWN=12
  # The hw description from calibrate when it wrote one.
  [ -s $W/hw.json ] && echo $W/hw.json >$W/hw-choice
  case $s in
  calibrate)
    run_stage calibrate "$limit" bash -c calibrate_stage ;;
  unit)
    FILTER='^-- |^exit|FAILED|PASSED|differ|error'
    LINES_SHOWN=40
    run_stage unit "$limit" bash -c unit_suites ;;
  big-cpu)
    run_stage big-cpu "$limit" bash -c "zinc_case big-cpu $big_flags --gpu-mem $GPU_MEM \
      --compile-flag=--offload-optimizer=cpu" ;;
  big-dpu)
    run_stage big-dpu "$limit" bash -c "zinc_case big-dpu $big_flags --gpu-mem $GPU_MEM \
      --compile-flag=--offload-optimizer=cpu --compile-flag=--dpu" ;;
  big-nvme)
    run_stage big-nvme "$limit" bash -c "zinc_case big-nvme --layers 24 --d-model 2560 --heads 20 \
      --seq $BIG_SEQ --batch $BIG_BATCH --gpu-mem $GPU_MEM --compile-flag=--offload-optimizer=nvme" ;;
  fsdp2)
    run_stage fsdp2 "$limit" python3 "$ROOT/bench/gpu_baselines.py" fsdp2 $big_flags \
      --gpu-mem-fraction "$GPU_FRACTION" --warmup 1 --steps 4 --out "$OUT/fsdp2.json" ;;
  unlimited)
    run_stage unlimited "$limit" python3 "$ROOT/bench/gpu_baselines.py" unlimited $big_flags \
      --probe-layers 2,4 --warmup 1 --steps 4 --out "$OUT/unlimited.json" ;;
  resident-zinc)
    run_stage resident-zinc "$limit" bash -c "zinc_case resident-zinc --layers 24 --d-model 2048 \
      --heads 16 --seq 2048 --batch 8 --compile-flag=--offload-optimizer=none \
      --compile-flag=--offload-params=none" ;;
  resident-torch)
    run_stage resident-torch "$limit" python3 "$ROOT/bench/gpu_baselines.py" resident \
      --layers 24 --d-model 2048 --heads 16 --seq 2048 --batch 8 --warmup 1 --steps 4 \
      --out "$OUT/resident-torch.json" ;;
  attention)
    run_stage attention "$limit" bash -c attention_stage ;;
  e2e)
    FILTER='FAIL|ERROR|Error|error|OK|Ran |skipped|^[^ ]'
    run_stage e2e "$limit" bash -c "cd $ROOT/test/e2e && python3 -m unittest -v \
      test_cuda.CudaBackendTest.test_bf16_tracks_fp32 \
      test_cuda.CudaBackendTest.test_offload_peak_measured_within_plan" ;;
  ceilings)
    run_stage ceilings "$limit" bash -c "$Z/build/bench/zinc-bench-cuda --reps 10 --copy-mib 1024 \
      | tee $W/ceilings.jsonl; python3 -c \"import json, sys; json.dump([json.loads(l) for l in open(sys.argv[1]) if l.startswith('{')], open(sys.argv[2], 'w'), indent=1)\" $W/ceilings.jsonl $OUT/ceilings.json" ;;
  memcheck)
    FILTER='ERROR SUMMARY|error|Error|step'
    run_stage memcheck "$limit" bash -c memcheck_stage ;;
  zero-mpi)
    FILTER='FAIL|ERROR|Error|error|ok$|OK|Ran |skipped|mpirun'
    LINES_SHOWN=20
    run_stage zero-mpi "$limit" bash -c zero_mpi_stage ;;
  compare)
    run_stage compare "$limit" bash -c compare_stage ;;
  train)
    run_stage train "$limit" python3 "$ROOT/bench/cuda_train_gpt.py" run "$PACK/gpt2s" \
      --build-dir $Z/build --warmup 2 --steps 6 --out "$OUT/train.json" ;;
  esac
done
echo "== $(( $(date +%s) - START )) s in all; figures: $(cd "$OUT" && ls *.json | tr '\n' ' ')"
