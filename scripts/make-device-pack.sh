#!/bin/bash
# Packs what scripts/cuda-device-check.sh runs on a GPU machine: the tools,
# the cuda unit tests and benchmark (stripped), and every shared library
# they need that such a machine may lack (its own CUDA libraries excepted),
# with Open MPI's launcher and components (scripts/pack-openmpi.sh: the
# machine has no package registry to install mpirun from), into
# PACK/pack.tar.xz; the exported GPT of bench/cuda_train_gpt.py into
# PACK/gpt2s (once: the export takes minutes on a small machine); and the
# models of test/e2e/training_exports.py into PACK/exports (exported with
# this machine's PyTorch, whatever the GPU machine's exporter writes).
#
#   scripts/make-device-pack.sh [BUILD] [PACK]     (defaults: build .devpack)
#   scripts/make-device-pack.sh --check-size [PACK] (only the size check)
#
# A device call carries the working tree (tracked files and untracked ones
# not ignored) and the carried PACK, 64 MiB at most: the script refuses a
# pack that leaves less than 4 MiB of that. Models larger than that (the
# device check's 6B GPT) are written on the device, shape-only.
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)

# The bytes one device call would carry: the tree and PACK; fails over the
# limit less a 4 MiB margin.
check_size() {
  local pack=$1 limit=$((64 << 20)) margin=$((4 << 20)) tree packed=0
  tree=$(cd "$ROOT" && git ls-files -z -co --exclude-standard |
    du -cb --files0-from=- 2>/dev/null | tail -1 | cut -f1)
  [ -e "$pack" ] && packed=$(du -sb "$pack" | cut -f1)
  echo "device call: tree $((tree >> 20)) MiB + pack $((packed >> 20)) MiB = $(((tree + packed) >> 20)) MiB of $((limit >> 20)) MiB"
  if [ $((tree + packed)) -gt $((limit - margin)) ]; then
    echo "make-device-pack: the tree and $pack come to $((tree + packed)) bytes, over the device tool's 64 MiB less a 4 MiB margin" >&2
    return 1
  fi
}
if [ "${1:-}" = "--check-size" ]; then
  check_size "${2:-.devpack}"
  exit
fi
BUILD=${1:-build}
PACK=${2:-.devpack}
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
# mpirun for the ranks of the zero-mpi stage, relocated there by OPAL_PREFIX.
# Without Open MPI 4 here the pack is still made, for every other stage.
"$ROOT/scripts/pack-openmpi.sh" "$S" ||
  echo "make-device-pack: Open MPI not packed: the zero-mpi stage cannot start ranks" >&2
mkdir -p "$PACK"
tar cJf "$PACK/pack.tar.xz" -C "$S" build lib $(cd "$S" && ls -d ompi 2>/dev/null)
[ -e "$PACK/gpt2s/config.json" ] || /usr/bin/python3 "$ROOT/bench/cuda_train_gpt.py" prepare "$PACK/gpt2s"
[ -e "$PACK/exports/resnet18.onnx.xz" ] || /usr/bin/python3 "$ROOT/test/e2e/training_exports.py" "$PACK/exports"
ls -la "$PACK/pack.tar.xz"
check_size "$PACK"
