#!/bin/bash
# Packs what scripts/cuda-device-check.sh runs on a GPU machine: the tools,
# the cuda unit tests and benchmark (stripped), and every shared library
# they need that such a machine may lack (its own CUDA libraries excepted),
# into PACK/pack.tar.xz; the exported GPT of bench/cuda_train_gpt.py into
# PACK/gpt2s (once: the export takes minutes on a small machine); and the
# models of test/e2e/training_exports.py into PACK/exports (exported with
# this machine's PyTorch, whatever the GPU machine's exporter writes).
#
#   scripts/make-device-pack.sh [BUILD] [PACK]     (defaults: build .devpack)
set -eu
BUILD=${1:-build}
PACK=${2:-.devpack}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
S=$(mktemp -d)
trap 'rm -rf "$S"' EXIT
bins="tools/zinc-run tools/zinc-compile test/zinc-unit-cuda bench/zinc-bench-cuda"
for b in $bins; do
  mkdir -p "$S/build/$(dirname $b)"
  strip -o "$S/build/$b" "$BUILD/$b"
done
mkdir -p "$S/lib"
# Everything ldd resolves outside the C library and the CUDA libraries
# too large to carry (cuBLAS, cuBLASLt, NCCL: the GPU machine has them).
for b in $bins; do ldd "$BUILD/$b"; done | awk '$3 ~ /^\// {print $1, $3}' | sort -u |
  while read -r name path; do
    case $name in
      libc.so*|libm.so*|libdl.so*|librt.so*|libpthread.so*|libstdc++*|libgcc_s*) ;;
      libcublas*|libnccl*) ;;
      *) cp -L "$path" "$S/lib/$name" ;;
    esac
  done
mkdir -p "$PACK"
tar cJf "$PACK/pack.tar.xz" -C "$S" build lib
[ -e "$PACK/gpt2s/config.json" ] || /usr/bin/python3 "$ROOT/bench/cuda_train_gpt.py" prepare "$PACK/gpt2s"
[ -e "$PACK/exports/resnet18.onnx.xz" ] || /usr/bin/python3 "$ROOT/test/e2e/training_exports.py" "$PACK/exports"
ls -la "$PACK/pack.tar.xz"
