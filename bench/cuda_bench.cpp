//===- cuda_bench.cpp - The cuda backend's GEMMs and copies vs plain CUDA -===//
//
// Two measurements, each a ratio taken in one run on one GPU:
//   gemm: zinc's cuBLASLt GEMM (the call the MatMul kernels make, its
//         algorithm chosen per shape and cached) against one plain cuBLAS
//         call (cublasGemmEx / cublasGemmStridedBatchedEx) of the same
//         shape, types and compute mode; TFLOP/s of each.
//   copy: host <-> device bytes/s of a plan's zinc.Copy run by zinc's
//         executor (the CUDA runtime's pinned CPU tier, its copy streams and
//         events) against cudaMemcpyAsync between cudaHostAlloc'd memory and
//         cudaMalloc'd memory.
//   attention: zinc.Attention and zinc.AttentionGrad (the kernels a plan
//         runs) on bf16 [B, H, T, D] heads, causal, T 2048, D 64 and 128:
//         milliseconds and TFLOP/s (causal FLOPs: half the square) of the
//         forward and of forward + backward; the PyTorch side (SDPA's flash
//         kernel) is bench/gpu_baselines.py's, run in the same device call.
// Times are medians over --reps repetitions, each timed with CUDA events
// (GEMMs) or around a whole executor step (copies, host clock after the
// step's synchronisation), after warm-up. Inputs are random, never zeros.
//
// Prints one JSON object per line: {"bench": "gemm"|"copy", ...}.
//
// Usage: zinc-bench-cuda [--reps N] [--copy-mib M] [gemm|copy|attention ...]
//
//===----------------------------------------------------------------------===//
#include "zinc/plan/PlanBuilder.h"
#include "zinc/runtime/Executor.h"
#include "zinc/runtime/Program.h"
#include "zinc/runtime/cuda/CublasLtGemm.h"
#include "zinc/runtime/cuda/CudaCheck.h"
#include "zinc/runtime/cuda/CudaKernel.h"
#include "zinc/runtime/cuda/DeviceTensor.h"
#include "zinc/support/Attribute.h"
#include "zinc/runtime/cuda/CudaRuntime.h"
#include "zinc/runtime/cuda/Device.h"
#include "zinc/support/Error.h"
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <random>
#include <string>
#include <vector>

using namespace zinc;

namespace {

[[noreturn]] void die(llvm::Error err) {
  std::fprintf(stderr, "zinc-bench-cuda: error: %s\n",
               llvm::toString(std::move(err)).c_str());
  std::exit(1);
}
void check(llvm::Error err) {
  if (err)
    die(std::move(err));
}
void checkCu(cudaError_t s, const char *what) {
  check(cuda::checkCuda(s, what));
}
void checkBlas(cublasStatus_t s, const char *what) {
  if (s != CUBLAS_STATUS_SUCCESS)
    die(makeError(std::string(what) + ": cuBLAS status " + std::to_string(s)));
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Shape {
  const char *name;
  DType dtype;
  bool tf32;
  int64_t m, n, k, batch;
};

/// Random values in [-1, 1] of `dtype`, written to device memory.
void fillRandom(void *dev, DType dtype, int64_t count, std::mt19937 &rng) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  size_t bytes = count * dtypeSize(dtype);
  std::vector<uint8_t> host(bytes);
  for (int64_t i = 0; i < count; ++i) {
    float v = dist(rng);
    if (dtype == DType::F32)
      std::memcpy(&host[i * 4], &v, 4);
    else if (dtype == DType::F16) {
      __half h = __float2half(v);
      std::memcpy(&host[i * 2], &h, 2);
    } else {
      __nv_bfloat16 h = __float2bfloat16(v);
      std::memcpy(&host[i * 2], &h, 2);
    }
  }
  checkCu(cudaMemcpy(dev, host.data(), bytes, cudaMemcpyHostToDevice),
          "cudaMemcpy(inputs)");
}

cudaDataType_t cudaType(DType d) {
  return d == DType::F32 ? CUDA_R_32F : d == DType::F16 ? CUDA_R_16F : CUDA_R_16BF;
}

/// Median seconds of `fn` (which queues on `stream`) over `reps`, events.
template <typename Fn>
double timeOnStream(cudaStream_t stream, int reps, Fn &&fn) {
  cudaEvent_t start, stop;
  checkCu(cudaEventCreate(&start), "cudaEventCreate");
  checkCu(cudaEventCreate(&stop), "cudaEventCreate");
  for (int i = 0; i < 3; ++i)
    fn();
  std::vector<double> times;
  for (int i = 0; i < reps; ++i) {
    checkCu(cudaEventRecord(start, stream), "cudaEventRecord");
    fn();
    checkCu(cudaEventRecord(stop, stream), "cudaEventRecord");
    checkCu(cudaEventSynchronize(stop), "cudaEventSynchronize");
    float ms = 0;
    checkCu(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
    times.push_back(ms * 1e-3);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return median(times);
}

void benchGemm(int reps) {
  const Shape shapes[] = {
      {"square f32", DType::F32, false, 4096, 4096, 4096, 1},
      {"square tf32", DType::F32, true, 4096, 4096, 4096, 1},
      {"square bf16", DType::BF16, false, 8192, 8192, 8192, 1},
      {"square f16", DType::F16, false, 8192, 8192, 8192, 1},
      {"gpt qkv bf16", DType::BF16, false, 16384, 2304, 768, 1},
      {"gpt mlp-out bf16", DType::BF16, false, 16384, 768, 3072, 1},
      {"attention bf16", DType::BF16, false, 1024, 1024, 64, 192},
  };
  cudaStream_t stream;
  checkCu(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking),
          "cudaStreamCreate");
  auto ctx = cuda::GemmContext::create();
  if (!ctx)
    die(ctx.takeError());
  cublasHandle_t blas;
  checkBlas(cublasCreate(&blas), "cublasCreate");
  checkBlas(cublasSetStream(blas, stream), "cublasSetStream");
  std::mt19937 rng(7);
  for (const Shape &s : shapes) {
    size_t elem = dtypeSize(s.dtype);
    int64_t na = s.batch * s.m * s.k, nb = s.batch * s.k * s.n,
            nc = s.batch * s.m * s.n;
    void *a, *b, *c;
    checkCu(cudaMalloc(&a, na * elem), "cudaMalloc(A)");
    checkCu(cudaMalloc(&b, nb * elem), "cudaMalloc(B)");
    checkCu(cudaMalloc(&c, nc * elem), "cudaMalloc(C)");
    fillRandom(a, s.dtype, na, rng);
    fillRandom(b, s.dtype, nb, rng);
    cuda::GemmDesc d;
    d.dtype = s.dtype;
    d.m = s.m;
    d.n = s.n;
    d.k = s.k;
    d.batch = s.batch;
    d.strideA = s.batch > 1 ? s.m * s.k : 0;
    d.strideB = s.batch > 1 ? s.k * s.n : 0;
    d.strideC = s.batch > 1 ? s.m * s.n : 0;
    d.tf32 = s.tf32;
    double zinc = timeOnStream(stream, reps, [&] {
      check(cuda::gemm(**ctx, d, a, b, c, stream));
    });
    // Plain cuBLAS, row-major through the same swap: C^T = B^T A^T.
    float alpha = 1, beta = 0;
    cublasComputeType_t compute =
        s.tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    cudaDataType_t t = cudaType(s.dtype);
    double plain = timeOnStream(stream, reps, [&] {
      if (s.batch == 1)
        checkBlas(cublasGemmEx(blas, CUBLAS_OP_N, CUBLAS_OP_N, s.n, s.m, s.k,
                               &alpha, b, t, s.n, a, t, s.k, &beta, c, t, s.n,
                               compute, CUBLAS_GEMM_DEFAULT),
                  "cublasGemmEx");
      else
        checkBlas(cublasGemmStridedBatchedEx(
                      blas, CUBLAS_OP_N, CUBLAS_OP_N, s.n, s.m, s.k, &alpha, b,
                      t, s.n, s.k * s.n, a, t, s.k, s.m * s.k, &beta, c, t,
                      s.n, s.m * s.n, s.batch, compute, CUBLAS_GEMM_DEFAULT),
                  "cublasGemmStridedBatchedEx");
    });
    double flops = 2.0 * s.m * s.n * s.k * s.batch;
    std::printf("{\"bench\": \"gemm\", \"shape\": \"%s\", \"m\": %lld, \"n\": "
                "%lld, \"k\": %lld, \"batch\": %lld, \"zinc_tflops\": %.1f, "
                "\"cublas_tflops\": %.1f, \"ratio\": %.3f}\n",
                s.name, (long long)s.m, (long long)s.n, (long long)s.k,
                (long long)s.batch, flops / zinc * 1e-12, flops / plain * 1e-12,
                plain / zinc);
    std::fflush(stdout);
    cudaFree(a);
    cudaFree(b);
    cudaFree(c);
  }
  cublasDestroy(blas);
  cudaStreamDestroy(stream);
}

/// Seconds per step of a plan that copies `bytes` over one link, run by
/// zinc's executor on the cuda backend.
double zincCopySeconds(bool toDevice, uint64_t bytes, int reps) {
  plan::PlanBuilder b;
  int64_t n = static_cast<int64_t>(bytes / 4);
  int host = b.tensor("host", {n}, plan::TIER_CPU, 1, plan::ROLE_STATE);
  int dev = b.tensor("dev", {n}, plan::TIER_GPU, 1, plan::ROLE_STATE);
  if (toDevice)
    b.add("h2d", "CopyInto", {host, dev}, {}, plan::STREAM_H2D);
  else
    b.add("d2h", "CopyInto", {dev, host}, {}, plan::STREAM_D2H);
  auto program = rt::Program::fromPlan(b.finish());
  if (!program)
    die(program.takeError());
  // Random bytes in the host tensor (the device one gets them on the
  // first H2D, or from stateToDevice).
  std::mt19937 rng(3);
  auto *words = static_cast<uint32_t *>((*program)->tensor(host).data);
  for (int64_t i = 0; i < n; ++i)
    words[i] = rng();
  auto runtime = cuda::createCudaRuntime(**program);
  if (!runtime)
    die(runtime.takeError());
  check((*runtime)->stateToDevice());
  rt::ExecutorOptions opts;
  opts.hooks = runtime->get();
  auto executor = rt::Executor::create(**program, opts);
  if (!executor)
    die(executor.takeError());
  std::vector<double> times;
  for (int i = 0; i < reps + 3; ++i) {
    auto result = (*executor)->run(i + 1, false);
    if (!result)
      die(result.takeError());
    if (i >= 3)
      times.push_back(result->seconds);
  }
  return median(times);
}

double plainCopySeconds(bool toDevice, uint64_t bytes, int reps) {
  void *host, *dev;
  checkCu(cudaHostAlloc(&host, bytes, cudaHostAllocDefault), "cudaHostAlloc");
  checkCu(cudaMalloc(&dev, bytes), "cudaMalloc");
  std::memset(host, 0x5a, bytes);
  cudaStream_t stream;
  checkCu(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking),
          "cudaStreamCreate");
  double s = timeOnStream(stream, reps, [&] {
    checkCu(toDevice ? cudaMemcpyAsync(dev, host, bytes, cudaMemcpyHostToDevice, stream)
                     : cudaMemcpyAsync(host, dev, bytes, cudaMemcpyDeviceToHost, stream),
            "cudaMemcpyAsync");
  });
  cudaStreamDestroy(stream);
  cudaFree(dev);
  cudaFreeHost(host);
  return s;
}

void benchCopy(int reps, uint64_t mib) {
  uint64_t bytes = mib << 20;
  for (bool toDevice : {true, false}) {
    double zinc = zincCopySeconds(toDevice, bytes, reps);
    double plain = plainCopySeconds(toDevice, bytes, reps);
    std::printf("{\"bench\": \"copy\", \"direction\": \"%s\", \"bytes\": %llu, "
                "\"zinc_gbps\": %.2f, \"cudamemcpyasync_gbps\": %.2f, "
                "\"ratio\": %.3f}\n",
                toDevice ? "h2d" : "d2h", (unsigned long long)bytes,
                bytes / zinc * 1e-9, bytes / plain * 1e-9, plain / zinc);
    std::fflush(stdout);
  }
}

/// A device tensor of `dtype` and `shape` filled with uniform [-1, 1)
/// values (rounded to bf16 on the host), freed by the caller.
cuda::DeviceTensor randomDeviceTensor(DType dtype, llvm::ArrayRef<int64_t> shape,
                                      std::mt19937 &rng) {
  cuda::DeviceTensor t;
  t.dtype = dtype;
  t.shape.assign(shape.begin(), shape.end());
  std::uniform_real_distribution<float> dist(-1, 1);
  std::vector<__nv_bfloat16> host(t.numElements());
  for (auto &x : host)
    x = __float2bfloat16(dist(rng));
  checkCu(cudaMalloc(&t.data, t.byteSize()), "cudaMalloc");
  if (dtype == DType::BF16)
    checkCu(cudaMemcpy(t.data, host.data(), t.byteSize(), cudaMemcpyHostToDevice), "cudaMemcpy");
  else
    checkCu(cudaMemset(t.data, 0, t.byteSize()), "cudaMemset");
  return t;
}

/// Median milliseconds of `reps` runs of fn on `stream`, timed by events.
template <typename Fn> double medianMs(int reps, cudaStream_t stream, Fn &&fn) {
  cudaEvent_t start, stop;
  checkCu(cudaEventCreate(&start), "cudaEventCreate");
  checkCu(cudaEventCreate(&stop), "cudaEventCreate");
  fn(); // warm-up
  std::vector<double> ms;
  for (int r = 0; r < reps; ++r) {
    checkCu(cudaEventRecord(start, stream), "cudaEventRecord");
    fn();
    checkCu(cudaEventRecord(stop, stream), "cudaEventRecord");
    checkCu(cudaEventSynchronize(stop), "cudaEventSynchronize");
    float t = 0;
    checkCu(cudaEventElapsedTime(&t, start, stop), "cudaEventElapsedTime");
    ms.push_back(t);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

void benchAttention(int reps) {
  const int64_t batch = 4, heads = 16, t = 2048;
  cuda::CudaKernelFn forward = cuda::lookupCudaKernel(kZincDomain, "Attention");
  cuda::CudaKernelFn backward = cuda::lookupCudaKernel(kZincDomain, "AttentionGrad");
  if (!forward || !backward)
    die(makeError("no cuda kernel for zinc.Attention"));
  cudaStream_t stream;
  checkCu(cudaStreamCreate(&stream), "cudaStreamCreate");
  std::mt19937 rng(5);
  for (int64_t d : {64, 128}) {
    cuda::DeviceTensor q = randomDeviceTensor(DType::BF16, {batch, heads, t, d}, rng);
    cuda::DeviceTensor kt = randomDeviceTensor(DType::BF16, {batch, heads, d, t}, rng);
    cuda::DeviceTensor v = randomDeviceTensor(DType::BF16, {batch, heads, t, d}, rng);
    cuda::DeviceTensor dy = randomDeviceTensor(DType::BF16, {batch, heads, t, d}, rng);
    cuda::DeviceTensor y = randomDeviceTensor(DType::BF16, {batch, heads, t, d}, rng);
    cuda::DeviceTensor lse = randomDeviceTensor(DType::F32, {batch, heads, t}, rng);
    cuda::DeviceTensor dq = randomDeviceTensor(DType::BF16, q.shape, rng);
    cuda::DeviceTensor dkt = randomDeviceTensor(DType::BF16, kt.shape, rng);
    cuda::DeviceTensor dv = randomDeviceTensor(DType::BF16, v.shape, rng);
    AttributeList attrs;
    attrs.set(makeFloatAttr("scale", 1.0 / std::sqrt(double(d))));
    attrs.set(makeIntAttr("causal", 1));
    const cuda::DeviceTensor *fwdIns[] = {&q, &kt, &v};
    cuda::DeviceTensor *fwdOuts[] = {&y, &lse};
    const cuda::DeviceTensor *bwdIns[] = {&q, &kt, &v, nullptr, nullptr, &y, &lse, &dy};
    cuda::DeviceTensor *bwdOuts[] = {&dq, &dkt, &dv};
    auto runForward = [&] {
      cuda::CudaKernelCall call{"Attention", "bench", 17, attrs, fwdIns, fwdOuts};
      call.stream = stream;
      check(forward(call));
    };
    auto runBoth = [&] {
      runForward();
      cuda::CudaKernelCall call{"AttentionGrad", "bench", 17, attrs, bwdIns, bwdOuts};
      call.stream = stream;
      check(backward(call));
    };
    double fwdMs = medianMs(reps, stream, runForward);
    double bothMs = medianMs(reps, stream, runBoth);
    // Causal: half of the [T, T] products; the backward's five products
    // are 2.5x the forward's two (what FlashAttention's figures count).
    double fwdFlops = 4.0 * batch * heads * t * t * d / 2;
    double bothFlops = fwdFlops * 3.5;
    std::printf("{\"bench\": \"attention\", \"dtype\": \"bf16\", \"batch\": %lld, "
                "\"heads\": %lld, \"seq\": %lld, \"head_dim\": %lld, \"causal\": true, "
                "\"forward_ms\": %.3f, \"forward_backward_ms\": %.3f, "
                "\"forward_tflops\": %.2f, \"forward_backward_tflops\": %.2f}\n",
                (long long)batch, (long long)heads, (long long)t, (long long)d, fwdMs, bothMs,
                fwdFlops / fwdMs * 1e-9, bothFlops / bothMs * 1e-9);
    std::fflush(stdout);
    for (cuda::DeviceTensor *x : {&q, &kt, &v, &dy, &y, &lse, &dq, &dkt, &dv})
      cudaFree(x->data);
  }
  cudaStreamDestroy(stream);
}

} // namespace

int main(int argc, char **argv) {
  int reps = 20;
  uint64_t mib = 1024;
  std::vector<std::string> what;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--reps" && i + 1 < argc)
      reps = std::max(1, std::atoi(argv[++i]));
    else if (a == "--copy-mib" && i + 1 < argc)
      mib = std::max(1, std::atoi(argv[++i]));
    else if (a == "gemm" || a == "copy" || a == "attention")
      what.push_back(a);
    else {
      std::fprintf(stderr, "usage: zinc-bench-cuda [--reps N] [--copy-mib M] "
                           "[gemm|copy|attention ...]\n");
      return 2;
    }
  }
  if (what.empty())
    what = {"gemm", "copy"};
  auto devices = cuda::cudaDeviceCount();
  if (!devices)
    die(devices.takeError());
  if (*devices == 0) {
    std::fprintf(stderr, "zinc-bench-cuda: error: no CUDA device\n");
    return 1;
  }
  for (const std::string &w : what)
    w == "gemm"        ? benchGemm(reps)
    : w == "attention" ? benchAttention(reps)
                       : benchCopy(reps, mib);
  return 0;
}
