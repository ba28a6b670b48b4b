//===- Dropout.cpp - Dropout and its gradient on the cpu backend ----------===//
//
// Inference-mode Dropout (training_mode false, or ratio 0) copies its input.
// The training form build-training makes, Dropout(x) {ratio, seed_id}, keeps
// each element with probability 1 - ratio and scales it by 1 / (1 - ratio),
// PyTorch's `x * mask * scale` with the scale in float. The keep decisions come
// from Philox4x32-10 keyed by the run's seed, with the step, the node's
// `seed_id` (stamped by build-training) and the element index in the counter
// (support/Philox.h), so DropoutGrad can regenerate the mask instead of keeping
// it, and every backend draws the same mask. The step is the count of batches
// run (KernelCall::sampleStep): with gradient accumulation each micro-batch
// draws its own mask, and without it that is the training step. With several
// ranks, rank r's elements are numbered from r times the tensor's size: each
// rank draws its own mask, and when the batch is the outer axis, the one-rank
// run's mask of the whole batch.
//
//===----------------------------------------------------------------------===//
#include "KernelUtil.h"
#include "Kernels.h"
#include "zinc/runtime/comm/Communicator.h"
#include "zinc/support/Philox.h"
#include "llvm/ADT/Twine.h"
#include <algorithm>

using llvm::Error;
using llvm::Twine;

namespace zinc::cpu {

namespace {
/// What decides a training-mode Dropout's mask.
struct DropoutStream {
  float ratio = 0;
  uint32_t seedId = 0;
  uint64_t seed = 0;
  int64_t step = 0;
  /// The stream index of element 0 (this rank's first element).
  uint64_t offset = 0;

  float scale() const { return 1.0f / (1.0f - ratio); }

  /// Calls fn(i, keep) for every element of [0, n), in parallel ranges.
  template <typename Fn>
  void forEach(int64_t n, size_t workBytes, Fn &&fn) const {
    parallelRanges(n, workBytes, [&](int64_t begin, int64_t end) {
      int64_t i = begin;
      while (i < end) {
        uint64_t index = offset + static_cast<uint64_t>(i);
        Philox4x32Counter words = dropoutBlock(seed, step, seedId, index / 4);
        int64_t blockEnd = std::min<int64_t>(end, i + static_cast<int64_t>(4 - index % 4));
        for (; i < blockEnd; ++i)
          fn(i, dropoutKeeps(words.v[(offset + i) % 4], ratio));
      }
    });
  }
};
} // namespace

/// The stream of a training-mode node (its `seed_id`, a ratio below 1).
static llvm::Expected<DropoutStream> streamFor(const KernelCall &call,
                                               double ratio) {
  if (!(ratio >= 0 && ratio < 1))
    return kernelError(call.opType + ": ratio " + Twine(std::to_string(ratio)) +
                       " is outside [0, 1)");
  if (!call.attrs.has("seed_id"))
    return kernelError(call.opType + ": the seed_id attribute is missing");
  int64_t id = call.attrs.getInt("seed_id", 0);
  if (id < 0 || id > UINT32_MAX)
    return kernelError(call.opType + ": seed_id " + Twine(id) +
                       " is not a 32-bit unsigned integer");
  DropoutStream s;
  s.ratio = static_cast<float>(ratio);
  s.seedId = static_cast<uint32_t>(id);
  s.seed = call.seed;
  s.step = call.sampleStep();
  if (call.comm && call.input(0))
    s.offset = static_cast<uint64_t>(call.comm->rank()) * call.input(0)->numElements();
  return s;
}

static Error checkSameCount(const KernelCall &call, const TensorRef &t,
                            const TensorRef &data, const char *what) {
  if (t.numElements() == data.numElements())
    return Error::success();
  return kernelError(call.opType + ": " + what + " shape " +
                     formatShape(t.shape) + " differs from data shape " +
                     formatShape(data.shape));
}

/// out[i] = x[i] * keep[i] * scale, computed in T's compute type with the
/// scale in float; the mask (bool, or the data's type before opset 10)
/// records keep.
static Error dropoutForward(const KernelCall &call, const DropoutStream &s) {
  const TensorRef &x = *call.input(0);
  TensorRef &y = *call.output(0);
  TensorRef *mask = call.output(1);
  if (y.dtype != x.dtype)
    return kernelError(call.opType + ": output has type " + dtypeName(y.dtype) +
                       " but data has type " + dtypeName(x.dtype));
  if (Error e = checkSameCount(call, y, x, "output"))
    return e;
  if (mask)
    if (Error e = checkSameCount(call, *mask, x, "mask"))
      return e;
  float scale = s.scale();
  return visitDType(x.dtype, [&](auto tag) -> Error {
    using T = decltype(tag);
    if constexpr (!isFloatStorage<T>()) {
      return kernelError(call.opType +
                         ": training mode needs float data, not " +
                         dtypeName(x.dtype));
    } else {
      using C = ComputeT<T>;
      const T *src = x.as<T>();
      T *dst = y.as<T>();
      s.forEach(x.numElements(), 2 * x.byteSize(), [&](int64_t i, bool keep) {
        dst[i] = store<T>(load(src[i]) * C(keep ? 1 : 0) * C(scale));
      });
      if (mask)
        visitDType(mask->dtype, [&](auto mtag) {
          using M = decltype(mtag);
          M *m = mask->as<M>();
          s.forEach(x.numElements(), x.byteSize(), [&](int64_t i, bool keep) {
            m[i] = store<M>(keep ? 1 : 0);
          });
        });
      return Error::success();
    }
  });
}

Error runDropout(const KernelCall &call) {
  if (!call.input(0) || !call.output(0))
    return kernelError("Dropout: data input and output are required");
  // build-training's training form: Dropout(x) {ratio, seed_id}. The ratio
  // is an attribute so that mixed precision, which converts float
  // constants, cannot change it between forward and DropoutGrad.
  if (call.attrs.has("seed_id")) {
    if (!call.attrs.has("ratio"))
      return kernelError("Dropout: the ratio attribute is missing");
    auto stream = streamFor(call, call.attrs.getFloat("ratio", 0));
    if (!stream)
      return stream.takeError();
    return dropoutForward(call, *stream);
  }
  // ONNX's form. Before opset 12 Dropout has no training input: runtimes
  // treat it as inference. From 12 on, training_mode (input 2) defaults to
  // false.
  bool training = false;
  double ratio = call.attrs.getFloat("ratio", 0.5);
  if (call.opsetVersion >= 12) {
    if (const TensorRef *r = call.input(1)) {
      if (r->numElements() != 1)
        return kernelError("Dropout: ratio must be a scalar");
      ratio = visitDType(r->dtype, [&](auto tag) -> double {
        using T = decltype(tag);
        return static_cast<double>(load(r->template as<T>()[0]));
      });
    } else {
      ratio = 0.5;
    }
    if (const TensorRef *t = call.input(2)) {
      if (t->numElements() != 1)
        return kernelError("Dropout: training_mode must be a scalar");
      training = loadIndex(*t, 0) != 0;
    }
  }
  // build-training makes the training form wherever training_mode is a
  // Constant node; an initializer's value is only seen here.
  if (training && ratio != 0)
    return kernelError("Dropout: training_mode is true but build-training "
                       "made no training form (no seed_id): give "
                       "training_mode and ratio as Constant nodes");

  const TensorRef &x = *call.input(0);
  TensorRef &y = *call.output(0);
  if (y.dtype != x.dtype)
    return kernelError("Dropout: output has type " + dtypeName(y.dtype) +
                       " but data has type " + dtypeName(x.dtype));
  if (Error e = checkSameCount(call, y, x, "output"))
    return e;
  copyBytes(y.data, x.data, x.byteSize());
  // Every element is kept, so the mask is all true (all ones before opset
  // 10, where the mask has the data's type).
  if (TensorRef *mask = call.output(1)) {
    if (Error e = checkSameCount(call, *mask, x, "mask"))
      return e;
    visitDType(mask->dtype, [&](auto tag) {
      using T = decltype(tag);
      std::fill_n(mask->as<T>(), mask->numElements(), store<T>(1));
    });
  }
  return Error::success();
}

/// DropoutGrad(dy [, mask]) {ratio, seed_id}: dx = dy * keep * scale, with
/// keep read from the forward's mask when given, else regenerated from the
/// forward's stream (same seed, step and seed_id).
Error runDropoutGrad(const KernelCall &call) {
  const TensorRef *dy = call.input(0);
  TensorRef *dx = call.output(0);
  if (!dy || !dx)
    return kernelError("DropoutGrad: input 0 and output 0 are required");
  if (dx->dtype != dy->dtype)
    return kernelError("DropoutGrad: dx has type " + dtypeName(dx->dtype) +
                       " but dy has type " + dtypeName(dy->dtype));
  if (Error e = checkSameCount(call, *dx, *dy, "dx"))
    return e;
  if (!call.attrs.has("ratio"))
    return kernelError("DropoutGrad: the ratio attribute is missing");
  auto stream = streamFor(call, call.attrs.getFloat("ratio", 0));
  if (!stream)
    return stream.takeError();
  const TensorRef *mask = call.input(1);
  if (mask)
    if (Error e = checkSameCount(call, *mask, *dy, "mask"))
      return e;
  float scale = stream->scale();
  return visitDType(dy->dtype, [&](auto tag) -> Error {
    using T = decltype(tag);
    if constexpr (!isFloatStorage<T>()) {
      return kernelError("DropoutGrad: needs float gradients, not " +
                         dtypeName(dy->dtype));
    } else {
      using C = ComputeT<T>;
      const T *src = dy->as<T>();
      T *dst = dx->as<T>();
      auto apply = [&](int64_t i, bool keep) {
        dst[i] = store<T>(load(src[i]) * C(keep ? 1 : 0) * C(scale));
      };
      if (!mask) {
        stream->forEach(dy->numElements(), 2 * dy->byteSize(), apply);
        return Error::success();
      }
      visitDType(mask->dtype, [&](auto mtag) {
        using M = decltype(mtag);
        const M *m = mask->as<M>();
        parallelRanges(dy->numElements(), 2 * dy->byteSize(),
                       [&](int64_t begin, int64_t end) {
                         for (int64_t i = begin; i < end; ++i)
                           apply(i, load(m[i]) != 0);
                       });
      });
      return Error::success();
    }
  });
}

} // namespace zinc::cpu
