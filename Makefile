# zinc: two commands on a fresh Debian machine.
#   make run   installs dependencies, builds, and trains the bundled example
#   make test  installs dependencies, builds, and runs every test
#   make bench builds, then compares training steps/s with PyTorch (bench/README.md)
#   make bench-adam builds, then compares CPU AdamW params/s with PyTorch and a triad
#   make bench-compile builds, then times zinc-compile on shape-only GPTs up to 1T
#   make fuzz builds the libFuzzer targets with clang and runs each for 60 s
BUILD ?= build
JOBS ?= $(shell nproc)
DEPS_STAMP := $(BUILD)/.deps-installed
RUN_DIR := $(BUILD)/run

.PHONY: all deps configure build run test bench clean
.PHONY: bench-adam

all: build

# Re-run the installer whenever it changes.
$(DEPS_STAMP): scripts/install-deps.sh
	bash scripts/install-deps.sh
	mkdir -p $(BUILD) && touch $@

deps: $(DEPS_STAMP)

build: configure
	cmake --build $(BUILD) -j $(JOBS)

# make run: a real training run of the bundled GPT at byte level
# (examples/gpt/gpt-bytes.onnx, 0.47M parameters) on the English text of
# Debian's fortunes package, held-out blocks for evaluation: AdamW with warmup
# and cosine decay, gradient clipping, 4 micro-batches of 8 x 128 bytes per
# step, optimizer states and master weights on NVMe (a file under
# build/run/nvme), parameters in CPU memory. It builds only the two tools it
# runs.
RUN_CORPUS ?= /usr/share/games/fortunes
RUN_STEPS ?= 200
RUN_TOOLS := zinc-compile zinc-run

configure: deps
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo

run: configure
	cmake --build $(BUILD) -j $(JOBS) --target $(RUN_TOOLS)
	mkdir -p $(RUN_DIR)/nvme
	/usr/bin/python3 examples/gpt/byte_corpus.py $(RUN_DIR) $(RUN_CORPUS)
	$(BUILD)/tools/zinc-compile examples/gpt/gpt-bytes.onnx --mode=train \
	  --dim batch=8 --dim seq=128 --grad-accum=4 \
	  --optimizer=adamw --lr=2e-3 --weight-decay=0.1 --beta2=0.95 \
	  --lr-schedule=cosine --warmup-steps=20 --total-steps=$(RUN_STEPS) --clip-grad-norm=1.0 \
	  --offload-optimizer=nvme --offload-params=cpu \
	  -o $(RUN_DIR)/gpt.zplan --report=$(RUN_DIR)/report.json
	$(BUILD)/tools/zinc-run $(RUN_DIR)/gpt.zplan --backend=cpu --steps=$(RUN_STEPS) \
	  --data=$(RUN_DIR)/train.u16 --data-format=tokens-u16 --data-inputs=tokens,targets \
	  --eval-data=$(RUN_DIR)/eval.u16 --eval-every=50 --eval-steps=8 \
	  --nvme-dir=$(RUN_DIR)/nvme --metrics=$(RUN_DIR)/metrics.jsonl \
	  --save-weights=$(RUN_DIR)/weights.safetensors
	@echo "zinc: plan, report, metrics and trained weights are in $(RUN_DIR)/"

# The transformers e2e tests run in a virtualenv with Debian's torch and
# transformers from PyPI (test/e2e/transformers/requirements.txt).
TEST_VENV := $(BUILD)/test-venv
.PHONY: test-venv
test-venv: deps
	bash scripts/setup-test-venv.sh $(TEST_VENV)

test: build test-venv
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

# The unit, lit and cpu end-to-end tests under AddressSanitizer and
# UndefinedBehaviorSanitizer, in their own build directory (CI runs it after
# make test; ~9 min on 2 cores). The ONNX conformance run, the transformers and model-zoo
# e2e tests and the benchmarks' smoke test stay in make test. The cuda
# backend is left out here: without a GPU its tests are host-side checks that
# make test runs already, and its device code would add minutes of nvcc.
SAN_BUILD ?= build-sanitize
.PHONY: test-sanitize
test-sanitize: deps
	cmake -S . -B $(SAN_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DZINC_SANITIZE=ON -DZINC_ENABLE_CUDA=OFF
	cmake --build $(SAN_BUILD) -j $(JOBS)
	cd $(SAN_BUILD) && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  ctest --output-on-failure -j $(JOBS) -E 'conformance|transformers|zoo|bench'

# libFuzzer targets (fuzz/) over the ONNX frontend (binary and text), the
# plan loader, the safetensors reader, the --hw JSON and the checkpoint manifest, built with clang in their own
# directory: each replays its regression inputs (fuzz/regressions/), then
# fuzzes FUZZ_SECONDS from its seed corpus (fuzz/corpus/). CI runs it.
FUZZ_BUILD ?= build-fuzz
FUZZ_SECONDS ?= 60
.PHONY: fuzz
fuzz: deps
	cmake -S fuzz -B $(FUZZ_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DCMAKE_C_COMPILER=clang-14 -DCMAKE_CXX_COMPILER=clang++-14
	cmake --build $(FUZZ_BUILD) -j $(JOBS) --target zinc-fuzz-targets
	bash scripts/run-fuzzers.sh $(FUZZ_BUILD) $(FUZZ_SECONDS)

# Training steps/s of the bundled example, zinc vs PyTorch; JSON in bench/results/.
bench: build
	/usr/bin/python3 bench/train_gpt.py --build-dir $(BUILD)

# DeepSpeed's own ops (cpu_adam, async_io) as the baseline of bench-adam and
# bench-nvme: the venv bench/setup_deepspeed.sh makes (make bench-deepspeed).
DS_VENV ?= /var/tmp/zinc-ds-venv
DS_PYTHON = $(if $(wildcard $(DS_VENV)/bin/python),--ds-python $(DS_VENV)/bin/python)
.PHONY: bench-deepspeed
bench-deepspeed:
	bash bench/setup_deepspeed.sh $(DS_VENV)

# CPU AdamW params/s vs DeepSpeedCPUAdam (with DS_VENV), torch.optim.Adam(foreach=True)
# and a STREAM triad; JSON in bench/results/.
bench-adam: build
	/usr/bin/python3 bench/cpu_adam.py --build-dir $(BUILD) $(DS_PYTHON)

clean:
	rm -rf $(BUILD)

# Sequential NVMe-tier GB/s, zinc vs DeepSpeed's aio (with DS_VENV) and fio with the
# same block size and queue depth (bench/README.md); JSON in bench/results/.
# NVME_DIR must not be tmpfs.
NVME_DIR ?= /var/tmp/zinc-bench-nvme
.PHONY: bench-nvme
bench-nvme: build
	/usr/bin/python3 bench/nvme_io.py --build-dir $(BUILD) --dir $(NVME_DIR) $(DS_PYTHON)

# NVMe bytes/s of a GPT step whose fp32 AdamW state (314 MiB) lives on NVMe,
# per direction, against the engine's sequential rate in the same run
# (bench/README.md); JSON in bench/results/.
.PHONY: bench-offload
bench-offload: build
	/usr/bin/python3 bench/offload_nvme.py --build-dir $(BUILD)

# The cost model against the machine: --calibrate, then the GPT example's
# offload plan predicted vs measured (bench/predicted_step.py), the bundled
# example and a 27.4M-parameter nanoGPT.
.PHONY: bench-predicted
bench-predicted: build
	/usr/bin/python3 bench/predicted_step.py --build-dir $(BUILD)
	/usr/bin/python3 bench/predicted_step.py --build-dir $(BUILD) --nanogpt gpt-25m \
	  --dir /var/tmp/zinc-predicted-25m --reps 3 --warmup 1 --steps 3 \
	  --out bench/results/predicted_step-gpt-25m.json

# ZeRO stages 1 and 2 over 2 MPI ranks: collectives in the buckets the cost
# model chooses against one tensor each, same losses (bench/zero_buckets.py).
.PHONY: bench-zero-buckets
bench-zero-buckets: build
	/usr/bin/python3 bench/zero_buckets.py --build-dir $(BUILD)

# zinc-compile's seconds and peak RSS from 1.3B to 1T parameters and on a
# 100k-node graph (bench/README.md); JSON in bench/results/.
.PHONY: bench-compile
bench-compile: build
	/usr/bin/python3 bench/compile_scale.py --build-dir $(BUILD)

# nanoGPT of 27M and 84M parameters, 1 and 2 threads: zinc vs PyTorch and, with
# ORT_VENV made by bench/setup_ort.sh, ONNX Runtime Training; then the offloaded
# 25M plan vs the resident one (bench/README.md; ~45 min on 2 cores).
ORT_VENV ?= /var/tmp/zinc-ort-venv
.PHONY: bench-nanogpt
bench-nanogpt: build
	/usr/bin/python3 bench/train_nanogpt.py --build-dir $(BUILD) \
	  $(if $(wildcard $(ORT_VENV)/bin/python),--ort-python $(ORT_VENV)/bin/python)
	/usr/bin/python3 bench/train_nanogpt.py --build-dir $(BUILD) --models "" --offload \
	  --out bench/results/train_nanogpt_offload.json
