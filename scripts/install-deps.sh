#!/usr/bin/env bash
# Installs the Debian packages zinc builds and tests with. Idempotent: it runs
# `apt-get update` and installs whatever is missing; installed packages stay.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git
  llvm-14-dev llvm-14-tools             # ADT/Support, FileCheck, lit
  libonnx-dev libonnx-testdata          # ONNX parser/checker/shape inference; node tests
  libprotobuf-dev protobuf-compiler     # the plan format
  libopenblas-dev                       # cpu GEMMs
  libgtest-dev libgmock-dev             # unit tests
  libaio-dev                            # NVMe tier
  clang-14 libclang-rt-14-dev           # libFuzzer targets (make fuzz)
  fio                                   # NVMe tier benchmark baseline (make bench-nvme)
  libopenmpi-dev openmpi-bin            # multi-rank cpu collectives
  python3-torch python3-onnx python3-numpy  # end-to-end references (test side)
  python3-torchvision python3-venv     # torchvision models; the transformers test venv
  fortunes                              # English text (2.5 MB) make run trains on
)

sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
echo "zinc: installing build and test dependencies (apt-get)..."
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${packages[@]}" >/dev/null
echo "zinc: dependencies are installed."
