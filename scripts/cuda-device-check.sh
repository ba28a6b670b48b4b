#!/bin/bash
# The cuda backend's checks and benchmarks on a GPU machine, in one run, from
# binaries built elsewhere (GPU machines lent for minutes have no LLVM or
# protobuf to build zinc with):
#
#   scripts/make-device-pack.sh            # here: builds PACK/pack.tar.xz
#   scripts/cuda-device-check.sh [PACK]    # there: this script
#
# Stages, each under its own time limit so that one hang costs only itself,
# most important first; each writes STAGE.log under $OUT (default
# ./device-out) and prints its tail:
#   e2e     test/e2e/test_cuda.py: GPTs and convnets trained on both backends
#   unit    zinc-unit-cuda: every cuda kernel against its cpu kernel
#   bench   zinc-bench-cuda: GEMM vs cuBLAS, copies vs cudaMemcpyAsync
#   train   bench/cuda_train_gpt.py run PACK/gpt2s: step time vs PyTorch
#   memcheck  compute-sanitizer on two offloaded steps of the bundled GPT
#   compare   scripts/compare-backends.py on the carried convnets: one SGD
#             step at lr 1, the tensors whose gradients differ most (not in
#             the default list: for chasing a mismatch)
set -u
PACK=${1:-.devpack}
OUT=${OUT:-$PWD/device-out}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$OUT"
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
missing=$(ldd $Z/build/tools/zinc-run | grep "not found")
[ -n "$missing" ] && echo "missing libraries: $missing"

stage() {
  local name=$1 limit=$2 lines=$3
  shift 3
  local t0=$(date +%s)
  "$@" >"$OUT/$name.log" 2>&1 &
  local pid=$!
  ( sleep "$limit"; kill -TERM $pid 2>/dev/null ) &
  local watchdog=$!
  wait $pid
  local rc=$?
  kill $watchdog 2>/dev/null
  echo "== $name: exit $rc, $(( $(date +%s) - t0 )) s"
  grep -E "$FILTER" "$OUT/$name.log" | tail -n "$lines"
}

# STAGES picks and orders them (default: all, in this order).
STAGES=${STAGES:-"e2e unit bench train memcheck"}

unit_suites() {
  # One process per suite: a kernel fault is sticky for its CUDA context,
  # and would otherwise fail every test after it.
  local bin=$Z/build/test/zinc-unit-cuda
  for suite in $($bin --gtest_list_tests | grep -E '^[A-Za-z]+\.$' | tr -d .); do
    echo "-- $suite"
    # Every failure in full (brief: nothing about the tests that pass).
    timeout 30 $bin --gtest_filter="$suite.*" --gtest_brief=1 >"$OUT/unit-suite.log" 2>&1
    echo "exit $?"
    cat "$OUT/unit-suite.log" >>"$OUT/unit-failures.log"
    grep -E "FAILED  \]|PASSED|differ|error" "$OUT/unit-suite.log" | head -12
  done
}

for s in $STAGES; do
  case $s in
  e2e)
    FILTER='FAIL|ERROR|Error|error|OK|Ran |skipped|^[^ ]'
    stage e2e 240 40 python3 -m unittest discover -v -s "$ROOT/test/e2e" -p test_cuda.py ;;
  unit)
    FILTER='^-- |^exit|FAILED|PASSED|differ|error'
    stage unit 120 80 unit_suites
    rm -f "$OUT/unit-suite.log" ;;
  bench)
    FILTER='.'
    stage bench 40 12 $Z/build/bench/zinc-bench-cuda --reps 10 --copy-mib 1024 ;;
  train)
    FILTER='.'
    stage train 140 12 python3 "$ROOT/bench/cuda_train_gpt.py" run "$PACK/gpt2s" \
      --build-dir $Z/build --warmup 2 --steps 6 --out "$OUT/train.json" ;;
  compare)
    FILTER='.'
    for m in resnet18 mobilenet_v2; do
      stage compare-$m 90 30 python3 "$ROOT/scripts/compare-backends.py" \
        "$ZINC_E2E_EXPORTS/$m.onnx.xz" --data "$ZINC_E2E_EXPORTS/$m.safetensors" \
        --steps 1 --top 25 -- --dim batch=8 --optimizer=sgd --lr=1
    done
    # In plan order with a synchronisation after each instruction: a race
    # between streams shows as a difference that goes away here.
    ZINC_SERIAL=1 stage compare-resnet18-serial 90 14 python3 "$ROOT/scripts/compare-backends.py" \
      "$ZINC_E2E_EXPORTS/resnet18.onnx.xz" --data "$ZINC_E2E_EXPORTS/resnet18.safetensors" \
      --steps 1 -- --dim batch=8 --optimizer=sgd --lr=1 ;;
  memcheck)
    W=/tmp/zinc-memcheck && mkdir -p $W/nvme
    $Z/build/tools/zinc-compile "$ROOT/examples/gpt/gpt.onnx" --mode=train --optimizer=adamw \
      --offload-optimizer=nvme --offload-params=cpu -o $W/gpt.zplan >/dev/null 2>&1
    FILTER='ERROR SUMMARY|error|Error|step'
    stage memcheck 40 8 compute-sanitizer --tool memcheck --leak-check no \
      $Z/build/tools/zinc-run $W/gpt.zplan --backend=cuda --steps=2 --nvme-dir=$W/nvme
    # A convnet too (Conv, BatchNorm, pooling), when the pack carries one.
    if [ -n "${ZINC_E2E_EXPORTS:-}" ]; then
      xz -dc "$ZINC_E2E_EXPORTS/resnet18.onnx.xz" >$W/resnet18.onnx
      $Z/build/tools/zinc-compile $W/resnet18.onnx --dim batch=8 --optimizer=sgd \
        -o $W/resnet18.zplan >/dev/null 2>&1
      stage memcheck-resnet18 60 8 compute-sanitizer --tool memcheck --leak-check no \
        $Z/build/tools/zinc-run $W/resnet18.zplan --backend=cuda --steps=2 \
        --data="$ZINC_E2E_EXPORTS/resnet18.safetensors"
    fi ;;
  esac
done
