//===- RandomInit.cpp - --init=random: classifying and filling tensors ----===//
#include "zinc/runtime/RandomInit.h"
#include "zinc/support/Error.h"
#include "zinc/support/Float16.h"
#include "llvm/ADT/StringSet.h"
#include <algorithm>
#include <cstring>

namespace zinc::rt {

/// Whether the op's output `out` holds the values of its input `out`
/// (rearranged or converted at most): a scale read through it is still the
/// parameter's scale.
static bool passesValuesThrough(const plan::Instruction &inst) {
  if (inst.domain() == "zinc")
    return inst.op() == "Copy" || inst.op() == "AllGather" ||
           inst.op() == "ShardOf";
  return inst.domain().empty() &&
         (inst.op() == "Cast" || inst.op() == "Identity" ||
          inst.op() == "Reshape" || inst.op() == "Squeeze" ||
          inst.op() == "Unsqueeze" || inst.op() == "Flatten");
}

/// Operand positions of `inst` that scale activations elementwise.
static llvm::SmallVector<int, 2> scaleOperands(const plan::Instruction &inst) {
  if (!inst.domain().empty())
    return {};
  llvm::StringRef op = inst.op();
  if (op == "LayerNormalization" || op == "InstanceNormalization" ||
      op == "GroupNormalization" || op == "BatchNormalization")
    return {1};
  if (op == "Mul")
    return {0, 1};
  return {};
}

static bool isOptimizerUpdate(const plan::Instruction &inst) {
  return inst.domain() == "zinc" &&
         (inst.op() == "AdamW" || inst.op() == "Adam" || inst.op() == "SGD");
}

/// The initializer's rank: a tile's or shard's whole tensor counts.
static int wholeRank(const plan::Tensor &t) {
  if (t.init().whole_shape_size())
    return t.init().whole_shape_size();
  if (t.shard_of_size())
    return t.shard_of_size();
  return t.shape_size();
}

static bool isFloatCode(int32_t code) {
  auto dtype = dtypeFromOnnx(code);
  return dtype && isFloatDType(*dtype);
}

std::vector<RandomFillKind> classifyRandomInit(const plan::Plan &plan) {
  size_t count = plan.tensors_size();
  auto valid = [&](int id) { return id >= 0 && static_cast<size_t>(id) < count; };
  // Where each tensor's values come from, through ops that pass them on.
  std::vector<llvm::SmallVector<int, 1>> sources(count);
  for (const plan::Instruction &inst : plan.instructions()) {
    if (inst.domain() == "zinc" && inst.op() == "CopyInto") {
      if (inst.inputs_size() == 2 && valid(inst.inputs(0)) && valid(inst.inputs(1)))
        sources[inst.inputs(1)].push_back(inst.inputs(0));
      continue;
    }
    if (!passesValuesThrough(inst))
      continue;
    for (int i = 0; i < inst.outputs_size() && i < inst.inputs_size(); ++i)
      if (valid(inst.outputs(i)) && valid(inst.inputs(i)))
        sources[inst.outputs(i)].push_back(inst.inputs(i));
  }
  // The initializers whose values reach each kind of use, by name (a
  // parameter's tiles, shards, 16-bit copy and master share its name).
  // Each set keeps the tensors its walks have visited: a later walk stops
  // there, so all walks of a set together visit each tensor once.
  struct Reached {
    llvm::StringSet<> names;
    std::vector<char> seen;
  };
  Reached scales{{}, std::vector<char>(count, 0)}, variances = scales, trained = scales;
  auto reach = [&](int from, Reached &set) {
    std::vector<char> &seen = set.seen;
    llvm::StringSet<> &names = set.names;
    llvm::SmallVector<int, 8> work{from};
    while (!work.empty()) {
      int id = work.pop_back_val();
      if (!valid(id) || seen[id])
        continue;
      seen[id] = 1;
      const plan::Tensor &t = plan.tensors(id);
      if (t.has_init()) {
        names.insert(t.init().name());
        continue;
      }
      work.append(sources[id].begin(), sources[id].end());
    }
  };
  bool anyUpdate = false;
  for (const plan::Instruction &inst : plan.instructions()) {
    for (int pos : scaleOperands(inst))
      if (pos < inst.inputs_size())
        reach(inst.inputs(pos), scales);
    if (inst.domain().empty() && inst.op() == "BatchNormalization" &&
        inst.inputs_size() > 4)
      reach(inst.inputs(4), variances);
    if (isOptimizerUpdate(inst) && inst.inputs_size() > 0) {
      anyUpdate = true;
      reach(inst.inputs(0), trained);
    }
  }

  std::vector<RandomFillKind> kinds(count, RandomFillKind::Model);
  for (const plan::Tensor &t : plan.tensors()) {
    if (!t.has_init() || t.id() >= count)
      continue;
    llvm::StringRef name = t.init().name();
    RandomFillKind &kind = kinds[t.id()];
    if (t.role() == plan::ROLE_MODEL_STATE) {
      kind = isFloatCode(t.dtype()) && variances.names.contains(name) ? RandomFillKind::One
                                                                  : RandomFillKind::Zero;
      continue;
    }
    if (t.role() != plan::ROLE_PARAMETER && t.role() != plan::ROLE_STATE)
      continue;
    if (!isFloatCode(t.dtype()))
      continue;
    int rank = wholeRank(t);
    bool generated = anyUpdate ? trained.names.contains(name) : rank >= 1;
    if (!generated)
      continue;
    kind = rank >= 2               ? RandomFillKind::Normal
           : scales.names.contains(name) ? RandomFillKind::One
                                   : RandomFillKind::Zero;
  }
  return kinds;
}

/// Tensor `t`'s elements in its whole initializer (tile and shard).
static llvm::Expected<RandomInitIndexMap> indexMap(const plan::Tensor &t,
                                                   unsigned rank) {
  RandomInitIndexMap map;
  llvm::SmallVector<int64_t, 6> view(t.shard_of().begin(), t.shard_of().end());
  if (view.empty())
    view.assign(t.shape().begin(), t.shape().end());
  uint64_t viewElements = 1;
  for (int64_t d : view)
    viewElements *= static_cast<uint64_t>(std::max<int64_t>(d, 0));
  map.viewElements = viewElements;
  map.runLength = map.stride = std::max<uint64_t>(viewElements, 1);
  if (t.shard_of_size())
    map.shardBase = static_cast<uint64_t>(rank) *
                    static_cast<uint64_t>(t.shape_size() ? t.shape(0) : 0);
  const plan::InitializerSource &src = t.init();
  if (!src.whole_shape_size())
    return map;
  int64_t axis = src.slice_axis();
  size_t dims = src.whole_shape_size();
  bool fits = axis >= 0 && static_cast<size_t>(axis) < dims &&
              view.size() == dims && src.slice_begin() >= 0;
  for (size_t d = 0; fits && d < dims; ++d)
    fits = static_cast<int64_t>(d) == axis
               ? src.slice_begin() + view[d] <= src.whole_shape(d)
               : view[d] == src.whole_shape(d);
  if (!fits)
    return makeError("initializer '" + src.name() + "': the plan's tile " +
                     formatShape(view) + " at " + llvm::Twine(src.slice_begin()) +
                     " on axis " + llvm::Twine(axis) + " is not a share of it");
  uint64_t inner = 1;
  for (size_t d = axis + 1; d < dims; ++d)
    inner *= src.whole_shape(d);
  map.runLength = std::max<uint64_t>(view[axis] * inner, 1);
  map.stride = src.whole_shape(axis) * inner;
  map.first = src.slice_begin() * inner;
  return map;
}

llvm::Expected<std::vector<RandomInitTarget>>
planRandomInit(const plan::Plan &plan, unsigned rank) {
  std::vector<RandomFillKind> kinds = classifyRandomInit(plan);
  std::vector<RandomInitTarget> targets;
  for (const plan::Tensor &t : plan.tensors()) {
    if (t.id() >= kinds.size() || kinds[t.id()] == RandomFillKind::Model)
      continue;
    auto map = indexMap(t, rank);
    if (!map)
      return map.takeError();
    const std::string &name = t.init().name();
    targets.push_back({t.id(), kinds[t.id()], randomInitKey(name.data(), name.size()), *map});
  }
  return targets;
}

/// Writes whole-initializer elements [e, e + count) of a normal target to
/// `store(at + k, value)`: a block's Philox words and each Box-Muller pair
/// computed once.
template <typename Store>
static void storeNormalRun(const RandomInitTarget &target, uint64_t seed,
                           uint64_t e, uint64_t count, int64_t at, Store &store) {
  uint64_t k = 0;
  while (k < count) {
    Philox4x32Counter words = randomInitBlock(seed, target.key, e / 4);
    unsigned lane = static_cast<unsigned>(e % 4);
    unsigned lanes = static_cast<unsigned>(std::min<uint64_t>(4 - lane, count - k));
    float v[4];
    if (lane < 2)
      randomInitNormalPair(words, 0, kRandomInitStd, v[0], v[1]);
    if (lane + lanes > 2)
      randomInitNormalPair(words, 1, kRandomInitStd, v[2], v[3]);
    for (unsigned l = lane; l < lane + lanes; ++l)
      store(at + static_cast<int64_t>(k++), v[l]);
    e += lanes;
  }
}

/// Fills tensor elements [0, n) in chunks over the OpenMP team; within a
/// chunk, each stretch contiguous in the whole initializer at once.
template <typename Store>
static void fillElements(const RandomInitTarget &target, uint64_t seed,
                         int64_t n, Store store) {
  constexpr int64_t kChunk = 1 << 16;
  const RandomInitIndexMap &map = target.map;
#pragma omp parallel for schedule(dynamic, 1)
  for (int64_t begin = 0; begin < n; begin += kChunk) {
    int64_t end = std::min(n, begin + kChunk);
    for (int64_t i = begin; i < end;) {
      uint64_t j = map.shardBase + static_cast<uint64_t>(i);
      if (j >= map.viewElements) {
        // A shard's padding.
        for (; i < end; ++i)
          store(i, 0.0f);
        break;
      }
      uint64_t within = j % map.runLength;
      uint64_t count = std::min<uint64_t>({map.runLength - within,
                                           static_cast<uint64_t>(end - i),
                                           map.viewElements - j});
      uint64_t e = map.first + (j / map.runLength) * map.stride + within;
      if (target.kind == RandomFillKind::Normal) {
        storeNormalRun(target, seed, e, count, i, store);
      } else {
        float v = target.kind == RandomFillKind::One ? 1.0f : 0.0f;
        for (uint64_t k = 0; k < count; ++k)
          store(i + static_cast<int64_t>(k), v);
      }
      i += static_cast<int64_t>(count);
    }
  }
}

void fillRandomInit(const RandomInitTarget &target, cpu::TensorRef &out,
                    uint64_t seed) {
  int64_t n = out.numElements();
  switch (out.dtype) {
  case DType::F32: {
    float *p = out.as<float>();
    fillElements(target, seed, n, [p](int64_t i, float v) { p[i] = v; });
    return;
  }
  case DType::F64: {
    double *p = out.as<double>();
    fillElements(target, seed, n, [p](int64_t i, float v) { p[i] = v; });
    return;
  }
  case DType::F16: {
    uint16_t *p = out.as<uint16_t>();
    fillElements(target, seed, n, [p](int64_t i, float v) { p[i] = floatToHalf(v); });
    return;
  }
  case DType::BF16: {
    uint16_t *p = out.as<uint16_t>();
    fillElements(target, seed, n, [p](int64_t i, float v) { p[i] = floatToBf16(v); });
    return;
  }
  default:
    // Integer model state (BatchNorm's num_batches_tracked): zero.
    std::memset(out.data, 0, out.byteSize());
  }
}

} // namespace zinc::rt
