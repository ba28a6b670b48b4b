//===- cpu_adam.cpp - zinc-bench-adam: CPU AdamW params/s vs STREAM triad -===//
//
// Times zinc's CPU AdamW (optim::cpuAdam) on N fp32 parameters, for each
// ISA this CPU runs, and in the same process, with the same OpenMP threads,
// a STREAM-like triad a[i] = b[i] + s * c[i] over fp32 arrays of N elements
// (12 bytes counted per element, as STREAM counts them) for the memory
// bandwidth an update could reach. The repetitions of the two alternate so
// a drifting machine load hits both; medians are reported. The roofline of
// the update is triad bytes/s divided by the bytes one parameter moves
// (read param, grad, m, v and write param, m, v: 28 with an fp32 gradient
// and no copy). bench/cpu_adam.py adds PyTorch's optimizer for comparison.
//
//   zinc-bench-adam [--n N] [--reps R] [--warmup W] [--grad f32|f16|bf16]
//                   [--copy none|f16|bf16] [--isa all|best|scalar|avx2|avx512]
//                   [--json FILE]
//
//===----------------------------------------------------------------------===//
#include "zinc/runtime/optim/CpuAdam.h"
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

using namespace zinc;
using namespace zinc::optim;

namespace {

struct Options {
  int64_t n = int64_t(64) << 20;
  int reps = 7;
  int warmup = 2;
  FloatFormat grad = FloatFormat::F32;
  bool copy = false;
  FloatFormat copyFormat = FloatFormat::BF16;
  std::string isa = "all";
  std::string json;
  /// fp16 loss scaling: the gradients hold g * lossScale and the update
  /// unscales them in the same pass; 0 for none.
  float lossScale = 0;
};

[[noreturn]] void usage(const char *why) {
  std::fprintf(stderr,
               "zinc-bench-adam: %s\nusage: zinc-bench-adam [--n N] [--reps R] "
               "[--warmup W] "
               "[--grad f32|f16|bf16] [--copy none|f16|bf16] [--loss-scale S] "
               "[--isa all|best|scalar|avx2|avx512] [--json FILE]\n",
               why);
  std::exit(2);
}

bool parseFormat(const std::string &s, FloatFormat &f) {
  if (s == "f32")
    f = FloatFormat::F32;
  else if (s == "f16")
    f = FloatFormat::F16;
  else if (s == "bf16")
    f = FloatFormat::BF16;
  else
    return false;
  return true;
}

Options parseArgs(int argc, char **argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc)
        usage(("missing value after " + a).c_str());
      return argv[++i];
    };
    if (a == "--n")
      o.n = std::atoll(value().c_str());
    else if (a == "--reps")
      o.reps = std::atoi(value().c_str());
    else if (a == "--warmup")
      o.warmup = std::atoi(value().c_str());
    else if (a == "--grad") {
      if (!parseFormat(value(), o.grad))
        usage("--grad takes f32, f16 or bf16");
    } else if (a == "--copy") {
      std::string v = value();
      o.copy = v != "none";
      if (o.copy &&
          (!parseFormat(v, o.copyFormat) || o.copyFormat == FloatFormat::F32))
        usage("--copy takes none, f16 or bf16");
    } else if (a == "--loss-scale") {
      o.lossScale = std::strtof(value().c_str(), nullptr);
      if (!(o.lossScale > 0))
        usage("--loss-scale takes a positive number");
    } else if (a == "--isa")
      o.isa = value();
    else if (a == "--json")
      o.json = value();
    else
      usage(("unknown argument " + a).c_str());
  }
  if (o.n <= 0 || o.reps <= 0 || o.warmup < 0)
    usage("--n and --reps must be positive");
  return o;
}

/// 64-byte aligned, first touched by the OpenMP threads that will use it
/// (schedule(static) over the same tiles as cpuAdam).
template <typename T> T *allocate(int64_t n) {
  size_t bytes = (static_cast<size_t>(n) * sizeof(T) + 63) / 64 * 64;
  T *p = static_cast<T *>(std::aligned_alloc(64, bytes));
  if (!p)
    usage("out of memory");
  return p;
}

double now() {
  return std::chrono::duration<double>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

/// One thread's share of the triad, compiled for each ISA (GCC's
/// target_clones picks one at load time), so the bandwidth bound is not
/// held back by baseline x86-64 code.
__attribute__((target_clones("avx512f", "avx2", "default"))) void
triadSpan(float *__restrict a, const float *__restrict b,
          const float *__restrict c, float s, int64_t begin, int64_t end) {
#pragma omp simd
  for (int64_t i = begin; i < end; ++i)
    a[i] = b[i] + s * c[i];
}

void triad(float *a, const float *b, const float *c, float s, int64_t n) {
  int64_t tiles = (n + kAdamTile - 1) / kAdamTile;
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < tiles; ++t)
    triadSpan(a, b, c, s, t * kAdamTile, std::min(n, (t + 1) * kAdamTile));
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t k = v.size() / 2;
  return v.size() % 2 ? v[k] : (v[k - 1] + v[k]) / 2;
}

std::string list(const std::vector<double> &v) {
  std::string s = "[";
  char buf[64];
  for (size_t i = 0; i < v.size(); ++i) {
    std::snprintf(buf, sizeof buf, "%s%.6g", i ? ", " : "", v[i]);
    s += buf;
  }
  return s + "]";
}

const char *formatName(FloatFormat f) {
  return f == FloatFormat::F16    ? "f16"
         : f == FloatFormat::BF16 ? "bf16"
                                  : "f32";
}

} // namespace

int main(int argc, char **argv) {
  Options o = parseArgs(argc, argv);
  const int64_t n = o.n;
  const int threads = omp_get_max_threads();

  std::vector<simd::IsaKind> isas;
  for (simd::IsaKind k :
       {simd::IsaKind::Avx512, simd::IsaKind::Avx2, simd::IsaKind::Scalar}) {
    bool wanted = o.isa == "all" || o.isa == simd::isaName(k) ||
                  (o.isa == "best" && k == simd::bestIsa());
    if (wanted && simd::simdSupported(k))
      isas.push_back(k);
  }
  if (isas.empty())
    usage(("--isa " + o.isa + ": not supported on this CPU (or unknown)")
              .c_str());

  float *param = allocate<float>(n), *expAvg = allocate<float>(n),
        *expAvgSq = allocate<float>(n);
  size_t gradBytes = o.grad == FloatFormat::F32 ? 4 : 2;
  void *grad = o.grad == FloatFormat::F32
                   ? static_cast<void *>(allocate<float>(n))
                   : static_cast<void *>(allocate<uint16_t>(n));
  uint16_t *copy = o.copy ? allocate<uint16_t>(n) : nullptr;
  float *ta = allocate<float>(n), *tb = allocate<float>(n),
        *tc = allocate<float>(n);
  int64_t tiles = (n + kAdamTile - 1) / kAdamTile;
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < tiles; ++t)
    for (int64_t i = t * kAdamTile, e = std::min(n, (t + 1) * kAdamTile); i < e;
         ++i) {
      float x = static_cast<float>((i * 2654435761u) % 2000003) * 1e-6f - 1.0f;
      param[i] = x;
      expAvg[i] = 0;
      expAvgSq[i] = 0;
      float g = (0.01f * x + 1e-3f) * (o.lossScale > 0 ? o.lossScale : 1.0f);
      if (o.grad == FloatFormat::F32)
        static_cast<float *>(grad)[i] = g;
      else
        static_cast<uint16_t *>(grad)[i] =
            o.grad == FloatFormat::F16 ? floatToHalf(g) : floatToBf16(g);
      if (copy)
        copy[i] = 0;
      ta[i] = 0;
      tb[i] = x;
      tc[i] = g;
    }
  AdamBuffers buffers;
  buffers.param = param;
  buffers.expAvg = expAvg;
  buffers.expAvgSq = expAvgSq;
  buffers.grad = grad;
  buffers.gradFormat = o.grad;
  buffers.copy = copy;
  buffers.copyFormat = o.copyFormat;
  const double bytesPerParam =
      24.0 + static_cast<double>(gradBytes) + (o.copy ? 2.0 : 0.0);

  const float *scale = o.lossScale > 0 ? &o.lossScale : nullptr;
  // Warm-up: page faults, frequency, thread pool.
  int64_t step = 0;
  for (int w = 0; w < o.warmup; ++w) {
    triad(ta, tb, tc, 3.0f, n);
    for (simd::IsaKind k : isas)
      cpuAdam(
          makeAdamConstants(true, 1e-3, 0.9, 0.999, 1e-8, 1e-2, ++step, scale),
          buffers, n, k);
  }
  std::vector<double> triadSeconds;
  std::vector<std::vector<double>> adamSeconds(isas.size());
  for (int r = 0; r < o.reps; ++r) {
    double t0 = now();
    triad(ta, tb, tc, 3.0f, n);
    triadSeconds.push_back(now() - t0);
    for (size_t k = 0; k < isas.size(); ++k) {
      AdamConstants c =
          makeAdamConstants(true, 1e-3, 0.9, 0.999, 1e-8, 1e-2, ++step, scale);
      double t1 = now();
      cpuAdam(c, buffers, n, isas[k]);
      adamSeconds[k].push_back(now() - t1);
    }
  }
  // Keep the results observable.
  double checksum = 0;
  for (int64_t i = 0; i < n; i += 4099)
    checksum += param[i] + ta[i];

  const double triadBytesPerSec = 12.0 * n / median(triadSeconds);
  const double rooflineParamsPerSec = triadBytesPerSec / bytesPerParam;
  std::printf(
      "zinc-bench-adam: n=%lld threads=%d grad=%s copy=%s reps=%d (medians)\n",
      static_cast<long long>(n), threads, formatName(o.grad),
      o.copy ? formatName(o.copyFormat) : "none", o.reps);
  std::printf("  triad                 %8.2f GB/s   -> roofline %8.1f "
              "Mparams/s (%.0f B/param)\n",
              triadBytesPerSec / 1e9, rooflineParamsPerSec / 1e6,
              bytesPerParam);
  // With ordinary stores the triad also reads `a` before writing it (write
  // allocate): 16 bytes cross the memory bus per element, not 12. The
  // update's written arrays are all read first, so its 28 bytes are all it
  // moves; against the counted triad bytes it can reach 4/3.
  std::printf("  triad incl. write-allocate %6.2f GB/s\n",
              triadBytesPerSec * 16 / 12 / 1e9);
  std::string isaJson;
  for (size_t k = 0; k < isas.size(); ++k) {
    double pps = n / median(adamSeconds[k]);
    std::printf("  adamw %-8s        %8.1f Mparams/s  %6.2f GB/s  roofline "
                "ratio %.2f\n",
                simd::isaName(isas[k]), pps / 1e6, pps * bytesPerParam / 1e9,
                pps / rooflineParamsPerSec);
    char buf[256];
    std::snprintf(
        buf, sizeof buf,
        "%s    \"%s\": {\"params_per_s\": %.6g, \"bytes_per_s\": %.6g, "
        "\"roofline_ratio\": %.4f, \"seconds\": ",
        k ? ",\n" : "", simd::isaName(isas[k]), pps, pps * bytesPerParam,
        pps / rooflineParamsPerSec);
    isaJson += buf + list(adamSeconds[k]) + "}";
  }
  std::printf("  (checksum %.6g)\n", checksum);

  if (!o.json.empty()) {
    FILE *f = std::fopen(o.json.c_str(), "w");
    if (!f) {
      std::fprintf(stderr, "zinc-bench-adam: cannot write %s\n",
                   o.json.c_str());
      return 1;
    }
    std::fprintf(
        f,
        "{\n  \"n\": %lld,\n  \"threads\": %d,\n  \"grad\": \"%s\",\n  "
        "\"copy\": \"%s\",\n  \"loss_scale\": %g,\n"
        "  \"reps\": %d,\n  \"bytes_per_param\": %.0f,\n  \"best_isa\": "
        "\"%s\",\n"
        "  \"triad\": {\"bytes_per_s\": %.6g, "
        "\"bytes_per_s_with_write_allocate\": %.6g, "
        "\"seconds\": %s},\n"
        "  \"roofline_params_per_s\": %.6g,\n  \"adamw\": {\n%s\n  }\n}\n",
        static_cast<long long>(n), threads, formatName(o.grad),
        o.copy ? formatName(o.copyFormat) : "none", o.lossScale, o.reps,
        bytesPerParam, simd::isaName(isas.front()), triadBytesPerSec,
        triadBytesPerSec * 16 / 12, list(triadSeconds).c_str(),
        rooflineParamsPerSec, isaJson.c_str());
    std::fclose(f);
  }
  std::free(param);
  std::free(expAvg);
  std::free(expAvgSq);
  std::free(grad);
  std::free(copy);
  std::free(ta);
  std::free(tb);
  std::free(tc);
  return 0;
}
