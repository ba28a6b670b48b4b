//===- DeviceTestSupport.h - What every cuda kernel test's fixture shares -===//
//
// The pieces each cuda test file needs before it can compare a kernel with
// the cpu: host tensors from values or random draws, a tolerance, and a
// fixture that skips without a device and otherwise owns an arena and a
// stream and moves tensors to and from the device.
//
//===----------------------------------------------------------------------===//
#ifndef ZINC_TEST_UNIT_CUDA_DEVICETESTSUPPORT_H
#define ZINC_TEST_UNIT_CUDA_DEVICETESTSUPPORT_H

#include "test/unit/cuda/ErrorAssertions.h"
#include "test/unit/kernels/KernelCallHelpers.h"
#include "zinc/runtime/cuda/CudaCheck.h"
#include "zinc/runtime/cuda/CudaKernel.h"
#include "zinc/runtime/cuda/Device.h"
#include "gtest/gtest.h"
#include <cmath>
#include <random>
#include <string>
#include <vector>

namespace zinc::cuda::test {

using cpu::test::OwnedTensor;

/// The error's message, or "" for success.
inline std::string errorText(llvm::Error err) {
  return err ? llvm::toString(std::move(err)) : std::string();
}

/// Whether a device is usable; `why` says why not.
inline bool deviceAvailable(std::string &why) {
  llvm::Expected<int> count = cudaDeviceCount();
  if (!count) {
    why = "CUDA device query failed: " + llvm::toString(count.takeError());
    return false;
  }
  if (*count == 0) {
    why = "no CUDA device";
    return false;
  }
  return true;
}

/// Every element of `t` as double.
inline std::vector<double> valuesOf(const OwnedTensor &t) {
  return cpu::visitDType(t.ref.dtype,
                         [&](auto tag) { return t.values<decltype(tag)>(); });
}

/// A tensor of `dtype` holding `values`, converted as the cpu's store()
/// converts (so rounded as the cpu kernels round).
inline OwnedTensor tensorOf(DType dtype, llvm::ArrayRef<int64_t> shape,
                            const std::vector<double> &values) {
  return cpu::visitDType(dtype, [&](auto tag) {
    return OwnedTensor::of<decltype(tag)>(dtype, shape, values);
  });
}

/// How randomTensor turns draws into elements. Whatever the kind, a bool
/// tensor gets true and false (one rng() per element, no uniform draw).
enum class DrawKind {
  /// Uniform in [lo, hi]; an integer type truncates the draw.
  Uniform,
  /// Uniform in [lo, hi], rounded down (few distinct values, for
  /// comparisons).
  Floored,
  /// Uniform in [lo, hi], rounded down for a non-float type only.
  FlooredForIntegers,
  /// Magnitudes uniform in [lo, hi] with a random sign (divisors).
  AwayFromZero,
};

/// A random tensor of `dtype` and `shape`, drawn from `rng` as `kind` says.
inline OwnedTensor randomTensor(DType dtype, llvm::ArrayRef<int64_t> shape,
                                std::mt19937 &rng, double lo = -1,
                                double hi = 1,
                                DrawKind kind = DrawKind::Uniform) {
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<double> v(numElements(shape));
  for (double &x : v) {
    if (dtype == DType::Bool)
      x = double(rng() % 2);
    else if (kind == DrawKind::AwayFromZero)
      x = rng() % 2 ? dist(rng) : -dist(rng);
    else
      x = dist(rng);
    if (kind == DrawKind::Floored ||
        (kind == DrawKind::FlooredForIntegers && !isFloatDType(dtype)))
      x = std::floor(x);
  }
  return tensorOf(dtype, shape, v);
}

struct Tolerance {
  double atol, rtol;
};

/// Element-wise |got - want| <= atol + rtol * |want| over the values of
/// two tensors of as many elements; NaN only where NaN is wanted (an
/// element a kernel should have written and did not shows as NaN, the
/// fixture's fill). `exactInfinities`: an infinite want must be met exactly
/// (otherwise any rtol > 0 accepts every value there).
inline void expectValuesClose(const OwnedTensor &got, const OwnedTensor &want,
                              Tolerance tol, bool exactInfinities = false) {
  std::vector<double> g = valuesOf(got), w = valuesOf(want);
  ASSERT_EQ(g.size(), w.size());
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    bool ok = std::isnan(w[i]) ? std::isnan(g[i])
                               : (g[i] == w[i] ||
                                  ((!exactInfinities || std::isfinite(w[i])) &&
                                   std::fabs(g[i] - w[i]) <=
                                       tol.atol + tol.rtol * std::fabs(w[i])));
    if (!ok && bad++ == 0)
      first = i;
  }
  EXPECT_EQ(bad, 0u) << bad << " of " << g.size()
                     << " elements differ; first at " << first << ": got "
                     << g[first] << ", want " << w[first];
}

/// One unit in the last place, relative, of a 16-bit type; 0 otherwise
/// (for ops whose f32 results must be identical).
inline double halfUlp(DType t) {
  return t == DType::BF16 ? 1.0 / 128 : t == DType::F16 ? 1.0 / 1024 : 0.0;
}

/// A device tensor of `dtype` and `shape` with no memory behind it, for
/// checks that must fail before anything touches the device.
inline DeviceTensor shapeOnly(DType dtype, llvm::ArrayRef<int64_t> shape) {
  DeviceTensor d;
  d.dtype = dtype;
  d.shape.assign(shape.begin(), shape.end());
  return d;
}

/// Skips without a device; otherwise gives each test an arena and a stream
/// and the round trips between host tensors and the arena.
class DeviceTest : public ::testing::Test {
protected:
  /// Enough for every cuda test file's cases (the arena has no free: a
  /// test's cases share it).
  static constexpr uint64_t kDefaultArenaBytes = uint64_t(256) << 20;

  explicit DeviceTest(uint64_t arenaBytes = kDefaultArenaBytes)
      : arenaBytes(arenaBytes) {}

  /// A fixture that extends this calls it first and returns when
  /// IsSkipped() or HasFatalFailure().
  void SetUp() override {
    std::string why;
    if (!deviceAvailable(why))
      GTEST_SKIP() << why;
    ASSIGN_OR_FAIL(a, DeviceArena::create(arenaBytes));
    arena = std::move(a);
    ASSIGN_OR_FAIL(s, Stream::create());
    stream = std::move(s);
  }

  /// Space for a tensor, `shift` elements past an aligned offset (to test
  /// unaligned pointers), filled with 0xFF bytes: NaN in every float type,
  /// so anything left unwritten shows.
  llvm::Expected<DeviceTensor>
  allocate(DType dtype, llvm::ArrayRef<int64_t> shape, uint64_t shift = 0) {
    // Whole elements: a kernel may assume its tensors' natural alignment
    // (the arena gives every tensor at least 64 bytes), not 16 bytes.
    shift *= dtypeSize(dtype);
    DeviceTensor d = shapeOnly(dtype, shape);
    auto offset = arena.place(d.byteSize() + shift + 1);
    if (!offset)
      return offset.takeError();
    auto ptr = arena.pointer(*offset + shift, d.byteSize());
    if (!ptr)
      return ptr.takeError();
    d.data = *ptr;
    if (llvm::Error err =
            checkCuda(cudaMemsetAsync(d.data, 0xFF, d.byteSize(), stream.get()),
                      "cudaMemsetAsync"))
      return err;
    return d;
  }

  /// `t`'s bytes in space from allocate(); waits for the copy.
  llvm::Expected<DeviceTensor> upload(const OwnedTensor &t,
                                      uint64_t shift = 0) {
    auto d = allocate(t.ref.dtype, t.ref.shape, shift);
    if (!d)
      return d.takeError();
    if (llvm::Error err =
            checkCuda(cudaMemcpyAsync(d->data, t.ref.data, t.ref.byteSize(),
                                      cudaMemcpyHostToDevice, stream.get()),
                      "cudaMemcpyAsync(host to device)"))
      return err;
    // The host buffer may go away before the copy has run.
    if (llvm::Error err = stream.synchronize())
      return err;
    return d;
  }

  /// Waits for the stream and copies `d` back.
  llvm::Expected<OwnedTensor> download(const DeviceTensor &d) {
    OwnedTensor t(d.dtype, d.shape);
    if (llvm::Error err =
            checkCuda(cudaMemcpyAsync(t.ref.data, d.data, d.byteSize(),
                                      cudaMemcpyDeviceToHost, stream.get()),
                      "cudaMemcpyAsync(device to host)"))
      return err;
    if (llvm::Error err = stream.synchronize())
      return err;
    return t;
  }

  const uint64_t arenaBytes;
  DeviceArena arena;
  Stream stream;
};

} // namespace zinc::cuda::test

#endif
