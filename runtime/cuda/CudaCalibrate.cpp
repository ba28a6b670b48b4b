//===- CudaCalibrate.cpp - Measuring the GPU for zinc-run --calibrate -----===//
//
// The device half of zinc-run --calibrate --backend=cuda (CudaCalibrate.h):
// GEMMs through the project's cuBLASLt wrapper by precision, a
// device-to-device copy, copies to and from pinned host memory, empty
// kernels and small GEMMs back to back, and the executor driving the cuda
// backend. Every figure is the median of runs timed with CUDA events after a
// warm-up, on data that is not zeros (a product of zeros runs faster than
// one of real values). CudaDescription.cpp turns the figures into the
// description.
//
//===----------------------------------------------------------------------===//
#include "zinc/runtime/cuda/CudaCalibrate.h"
#include "kernels/CalibrationKernels.h"
#include "zinc/runtime/ExecutionHooks.h"
#include "zinc/runtime/Program.h"
#include "zinc/runtime/cuda/CublasLtGemm.h"
#include "zinc/runtime/cuda/CudaCheck.h"
#include "zinc/runtime/cuda/CudaRuntime.h"
#include "zinc/runtime/cuda/Device.h"
#include "zinc/support/Error.h"
#include "llvm/Support/FormatVariadic.h"
#include <algorithm>
#include <cstring>
#include <memory>
#include <sys/statvfs.h>
#include <unistd.h>

namespace zinc::cuda {
namespace {

struct EventDeleter {
  void operator()(CUevent_st *e) const { cudaEventDestroy(e); }
};
using TimingEvent = std::unique_ptr<CUevent_st, EventDeleter>;

llvm::Expected<TimingEvent> timingEvent() {
  cudaEvent_t e = nullptr;
  ZINC_CUDA_TRY(cudaEventCreate(&e));
  return TimingEvent(e);
}

/// The seconds of each of `runs` runs of `body` on `stream`, timed with
/// events; `body` queues its work and returns whether queueing worked.
template <typename F>
llvm::Expected<std::vector<double>> timeRuns(cudaStream_t stream, int runs,
                                             F body) {
  auto start = timingEvent();
  if (!start)
    return start.takeError();
  auto stop = timingEvent();
  if (!stop)
    return stop.takeError();
  std::vector<double> seconds;
  for (int i = 0; i < runs; ++i) {
    ZINC_CUDA_TRY(cudaEventRecord(start->get(), stream));
    if (auto err = body())
      return err;
    ZINC_CUDA_TRY(cudaEventRecord(stop->get(), stream));
    ZINC_CUDA_TRY(cudaEventSynchronize(stop->get()));
    float ms = 0;
    ZINC_CUDA_TRY(cudaEventElapsedTime(&ms, start->get(), stop->get()));
    seconds.push_back(ms * 1e-3);
  }
  return seconds;
}

/// The median seconds of `body` after a warm-up run, over as many runs as
/// fill `budget` seconds (within [minRuns, maxRuns]); `runsDone` gets the
/// count.
template <typename F>
llvm::Expected<double> medianRun(cudaStream_t stream, double budget,
                                 int minRuns, int maxRuns, F body,
                                 int *runsDone = nullptr) {
  auto first = timeRuns(stream, 2, body); // The first run warms up.
  if (!first)
    return first.takeError();
  int runs = timedRuns(first->back(), budget, minRuns, maxRuns);
  auto timed = timeRuns(stream, runs, body);
  if (!timed)
    return timed.takeError();
  if (runsDone)
    *runsDone = runs;
  return medianSeconds(std::move(*timed));
}

unsigned elementBytes(DType dtype) { return dtype == DType::F32 ? 4 : 2; }

llvm::Expected<GemmTiming> timeSquareGemm(GemmContext &ctx,
                                          const Stream &stream,
                                          const char *precision, DType dtype,
                                          bool tf32, int64_t n) {
  uint64_t matrix = uint64_t(n) * uint64_t(n);
  uint64_t bytes = matrix * elementBytes(dtype);
  auto arena = DeviceArena::create(3 * bytes + 3 * DeviceArena::kAlignment);
  if (!arena)
    return arena.takeError();
  void *abc[3];
  for (void *&p : abc) {
    auto offset = arena->place(bytes);
    if (!offset)
      return offset.takeError();
    auto ptr = arena->pointer(*offset, bytes);
    if (!ptr)
      return ptr.takeError();
    p = *ptr;
  }
  for (unsigned i = 0; i < 2; ++i)
    if (auto err = fillPattern(dtype, abc[i], matrix, 17 + i, stream.get()))
      return err;
  GemmDesc desc;
  desc.dtype = dtype;
  desc.m = desc.n = desc.k = n;
  desc.tf32 = tf32;
  GemmTiming timing;
  timing.precision = precision;
  timing.m = timing.n = timing.k = n;
  auto seconds = medianRun(
      stream.get(), 0.25, 5, 50,
      [&] { return gemm(ctx, desc, abc[0], abc[1], abc[2], stream.get()); },
      &timing.runs);
  if (!seconds)
    return addContext(seconds.takeError(),
                      llvm::Twine("--calibrate: the ") + precision + " GEMM");
  timing.seconds = *seconds;
  return timing;
}

/// Bytes for a copy measurement: `preferred`, or less when the device's
/// free memory (a quarter of it) or the host's (an eighth) is smaller.
uint64_t copyBytes(uint64_t preferred, uint64_t freeBytes, uint64_t hostBytes) {
  uint64_t bytes = std::min(
      {preferred, freeBytes / 4, hostBytes ? hostBytes / 8 : preferred});
  return std::max<uint64_t>(bytes / DeviceArena::kAlignment *
                                DeviceArena::kAlignment,
                            DeviceArena::kAlignment);
}

llvm::Error measureCopies(CudaFigures &f, const Stream &stream) {
  // Device to device.
  f.hbmCopyBytes = copyBytes(uint64_t(2) << 30, f.freeBytes, 0);
  {
    auto arena = DeviceArena::create(2 * f.hbmCopyBytes);
    if (!arena)
      return arena.takeError();
    char *src = static_cast<char *>(arena->base());
    char *dst = src + f.hbmCopyBytes;
    if (auto err =
            fillPattern(DType::F32, src, f.hbmCopyBytes / 4, 5, stream.get()))
      return err;
    auto seconds = medianRun(stream.get(), 0.2, 5, 40, [&] {
      return checkCuda(cudaMemcpyAsync(dst, src, f.hbmCopyBytes,
                                       cudaMemcpyDeviceToDevice, stream.get()),
                       "cudaMemcpyAsync(device to device)");
    });
    if (!seconds)
      return seconds.takeError();
    f.hbmCopySeconds = *seconds;
  }
  // Host to device and back, from pinned memory.
  f.hostCopyBytes =
      copyBytes(uint64_t(1) << 30, f.freeBytes, f.hostPhysicalBytes);
  auto arena = DeviceArena::create(f.hostCopyBytes);
  if (!arena)
    return arena.takeError();
  auto pinned = PinnedBuffer::create(f.hostCopyBytes);
  if (!pinned)
    return pinned.takeError();
  std::memset(pinned->data(), 0x3c, f.hostCopyBytes);
  auto h2d = medianRun(stream.get(), 0.3, 3, 20, [&] {
    return checkCuda(cudaMemcpyAsync(arena->base(), pinned->data(),
                                     f.hostCopyBytes, cudaMemcpyHostToDevice,
                                     stream.get()),
                     "cudaMemcpyAsync(host to device)");
  });
  if (!h2d)
    return h2d.takeError();
  f.h2dSeconds = *h2d;
  auto d2h = medianRun(stream.get(), 0.3, 3, 20, [&] {
    return checkCuda(cudaMemcpyAsync(pinned->data(), arena->base(),
                                     f.hostCopyBytes, cudaMemcpyDeviceToHost,
                                     stream.get()),
                     "cudaMemcpyAsync(device to host)");
  });
  if (!d2h)
    return d2h.takeError();
  f.d2hSeconds = *d2h;
  return llvm::Error::success();
}

/// Empty kernels, and small bf16 GEMMs, in bursts back to back: the
/// seconds per launch.
llvm::Error measureLaunches(CudaFigures &f, GemmContext &ctx,
                            const Stream &stream) {
  const int burst = 1000;
  auto empty = medianRun(stream.get(), 0.1, 7, 25, [&]() -> llvm::Error {
    return launchEmptyKernels(burst, stream.get());
  });
  if (!empty)
    return empty.takeError();
  f.emptyKernelSeconds = *empty / burst;

  f.smallGemmSize = 256;
  const int64_t n = f.smallGemmSize;
  uint64_t bytes = uint64_t(n) * n * 2;
  auto arena = DeviceArena::create(3 * bytes);
  if (!arena)
    return arena.takeError();
  char *a = static_cast<char *>(arena->base());
  if (auto err =
          fillPattern(DType::BF16, a, 2 * uint64_t(n) * n, 9, stream.get()))
    return err;
  GemmDesc desc;
  desc.dtype = DType::BF16;
  desc.m = desc.n = desc.k = n;
  const int gemms = 200;
  auto small = medianRun(stream.get(), 0.1, 7, 25, [&]() -> llvm::Error {
    for (int i = 0; i < gemms; ++i)
      if (auto err = gemm(ctx, desc, a, a + bytes, a + 2 * bytes, stream.get()))
        return err;
    return llvm::Error::success();
  });
  if (!small)
    return small.takeError();
  f.smallGemmSeconds = *small / gemms;
  return llvm::Error::success();
}

} // namespace

llvm::Expected<CudaFigures> measureCudaDevice(const rt::CalibrateOptions &o) {
  auto say = [&](const std::string &line) {
    if (o.progress)
      o.progress(line);
  };
  auto devices = cudaDeviceCount();
  if (!devices)
    return addContext(devices.takeError(), "--calibrate --backend=cuda");
  if (*devices == 0)
    return makeError(
        "--calibrate --backend=cuda needs a CUDA device, and this machine has "
        "none (zinc-run --calibrate alone measures the cpu backend)");
  CudaFigures f;
  f.deviceCount = *devices;
  ZINC_CUDA_TRY(cudaSetDevice(0));
  ZINC_CUDA_TRY(
      cudaFree(nullptr)); // Makes the context, whose memory is then not free.
  cudaDeviceProp prop;
  ZINC_CUDA_TRY(cudaGetDeviceProperties(&prop, 0));
  f.deviceName = prop.name;
  size_t freeBytes = 0, totalBytes = 0;
  ZINC_CUDA_TRY(cudaMemGetInfo(&freeBytes, &totalBytes));
  f.freeBytes = freeBytes;
  f.totalBytes = totalBytes;
  f.hostPhysicalBytes = static_cast<uint64_t>(sysconf(_SC_PHYS_PAGES)) *
                        static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  if (!o.nvmeDir.empty()) {
    struct statvfs fs;
    if (statvfs(o.nvmeDir.c_str(), &fs) != 0)
      return makeError(
          o.nvmeDir +
          ": --nvme-dir: cannot read its free space: " + std::strerror(errno));
    f.nvmeAvailableBytes = uint64_t(fs.f_bavail) * uint64_t(fs.f_frsize);
  }
  say(llvm::formatv("device 0 of {0}: {1}, {2:f2} GiB free of {3:f2} GiB",
                    f.deviceCount, f.deviceName,
                    double(f.freeBytes) / (1 << 30),
                    double(f.totalBytes) / (1 << 30))
          .str());

  // The executor first, before the large buffers come and go.
  CudaRuntimeOptions runtimeOptions;
  auto executor = rt::measureExecutorCosts([&](rt::Program &program) {
    return createCudaRuntime(program, runtimeOptions);
  });
  if (!executor)
    return addContext(executor.takeError(),
                      "--calibrate: timing the executor on the device");
  f.executorDispatchSeconds = executor->dispatch;
  f.executorWaitSeconds = executor->wait;
  say(llvm::formatv("executor: {0:e3} s per instruction, {1:e3} s more per "
                    "cross-stream wait",
                    f.executorDispatchSeconds, f.executorWaitSeconds)
          .str());

  auto stream = Stream::create();
  if (!stream)
    return stream.takeError();
  auto ctx = GemmContext::create();
  if (!ctx)
    return ctx.takeError();
  struct Precision {
    const char *name;
    DType dtype;
    bool tf32;
  };
  for (const Precision &p : {Precision{"fp32", DType::F32, false},
                             Precision{"tf32", DType::F32, true},
                             Precision{"bf16", DType::BF16, false},
                             Precision{"fp16", DType::F16, false}}) {
    int64_t n = squareGemmSize(elementBytes(p.dtype), f.freeBytes);
    if (n == 0)
      return makeError(
          llvm::Twine("--calibrate: too little free device memory for a ") +
          p.name + " GEMM");
    auto timing = timeSquareGemm(**ctx, *stream, p.name, p.dtype, p.tf32, n);
    if (!timing)
      return timing.takeError();
    f.gemms.push_back(*timing);
    say(llvm::formatv("GEMM {0} {1}^3: {2:e3} FLOP/s (median of {3})", p.name,
                      n, rateOf(timing->flops(), timing->seconds), timing->runs)
            .str());
  }
  if (auto err = measureCopies(f, *stream))
    return addContext(std::move(err), "--calibrate: timing copies");
  say(llvm::formatv(
          "device-to-device copy {0} MiB: {1:e3} bytes/s (read + written)",
          f.hbmCopyBytes >> 20, rateOf(2.0 * f.hbmCopyBytes, f.hbmCopySeconds))
          .str());
  say(llvm::formatv(
          "pinned copies {0} MiB: h2d {1:e3} bytes/s, d2h {2:e3} bytes/s",
          f.hostCopyBytes >> 20, rateOf(f.hostCopyBytes, f.h2dSeconds),
          rateOf(f.hostCopyBytes, f.d2hSeconds))
          .str());
  if (auto err = measureLaunches(f, **ctx, *stream))
    return addContext(std::move(err), "--calibrate: timing launches");
  say(llvm::formatv("empty kernel: {0:e3} s per launch; bf16 {1}^3 GEMM: "
                    "{2:e3} s per call",
                    f.emptyKernelSeconds, f.smallGemmSize, f.smallGemmSeconds)
          .str());
  return f;
}

llvm::Expected<std::string>
calibrateCudaMachine(const rt::CalibrateOptions &o) {
  auto figures = measureCudaDevice(o);
  if (!figures)
    return figures.takeError();
  auto host = loadHardware("cpu");
  if (!host)
    return host.takeError();
  if (auto err = rt::measureHostSide(o, *host))
    return err;
  auto hw = describeCudaMachine(*figures, *host);
  if (!hw)
    return hw.takeError();
  return cudaDescriptionJson(*hw, *figures);
}

} // namespace zinc::cuda
