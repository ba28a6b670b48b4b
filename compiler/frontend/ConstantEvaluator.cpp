//===- ConstantEvaluator.cpp - Evaluates ONNX nodes on known tensors ------===//
//
// One evaluator per op or family; an op's Fold column in Ops.def names its
// evaluator here.
//
//===----------------------------------------------------------------------===//
#include "compiler/frontend/ConstantEvaluator.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSwitch.h"
#include <cmath>

namespace zinc::frontend {

using TP = onnx::TensorProto;
using Dims = llvm::SmallVector<int64_t, 4>;
using Result = llvm::Optional<ConstantTensor>;

namespace {
/// One node's evaluation: its attributes, inputs and the size limit.
struct NodeContext {
  const onnx::NodeProto &node;
  llvm::ArrayRef<const ConstantTensor *> inputs;
  int64_t opset;
  int64_t maxElements;

  const ConstantTensor *input(int i) const {
    return i < static_cast<int>(inputs.size()) ? inputs[i] : nullptr;
  }
  const onnx::AttributeProto *attr(llvm::StringRef name) const {
    for (const onnx::AttributeProto &a : node.attribute())
      if (a.name() == name)
        return &a;
    return nullptr;
  }
  int64_t intAttr(llvm::StringRef name, int64_t fallback) const {
    const onnx::AttributeProto *a = attr(name);
    return a ? a->i() : fallback;
  }
  llvm::Optional<Dims> intsAttr(llvm::StringRef name) const {
    const onnx::AttributeProto *a = attr(name);
    if (!a)
      return llvm::None;
    return Dims(a->ints().begin(), a->ints().end());
  }
  /// A fresh output, or None past the size limit.
  Result allocate(int elemType, llvm::ArrayRef<int64_t> dims) const {
    int64_t n = 1;
    for (int64_t d : dims) {
      if (d < 0 || (d && n > maxElements / d))
        return llvm::None;
      n *= d;
    }
    if (n > maxElements || !ConstantTensor::isFoldableType(elemType))
      return llvm::None;
    return ConstantTensor::make(elemType, dims);
  }
};
} // namespace

/// The elements of an integer tensor, as shape-like operands are.
static llvm::Optional<Dims> intList(const ConstantTensor *t) {
  if (!t || t->isFloat())
    return llvm::None;
  return Dims(t->ints.begin(), t->ints.end());
}

/// Normalises an axis against `rank`; None when out of range.
static llvm::Optional<int64_t> normalizeAxis(int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= rank)
    return llvm::None;
  return axis < 0 ? axis + rank : axis;
}

/// Multidirectional (numpy) broadcasting of `shapes`.
static llvm::Optional<Dims>
broadcastDims(llvm::ArrayRef<llvm::ArrayRef<int64_t>> shapes) {
  size_t rank = 0;
  for (llvm::ArrayRef<int64_t> s : shapes)
    rank = std::max(rank, s.size());
  Dims out(rank, 1);
  for (llvm::ArrayRef<int64_t> s : shapes)
    for (size_t i = 0; i < s.size(); ++i) {
      int64_t &o = out[rank - s.size() + i];
      if (s[i] == o || s[i] == 1)
        continue;
      if (o != 1)
        return llvm::None;
      o = s[i];
    }
  return out;
}

/// The flat index into a tensor of `inDims` that broadcasts to element
/// `outIndex` of a tensor of `outDims`.
static int64_t broadcastOffset(int64_t outIndex, llvm::ArrayRef<int64_t> outDims,
                               llvm::ArrayRef<int64_t> inDims) {
  int64_t offset = 0, stride = 1;
  size_t lead = outDims.size() - inDims.size();
  for (size_t i = outDims.size(); i-- > 0;) {
    int64_t coord = outIndex % outDims[i];
    outIndex /= outDims[i];
    if (i < lead)
      continue;
    int64_t d = inDims[i - lead];
    if (d != 1)
      offset += coord * stride;
    stride *= d;
  }
  return offset;
}

//===-- Elementwise -------------------------------------------------------===//

enum class BinaryKind {
  Add, Sub, Mul, Div, Mod, Pow, Min, Max,
  Equal, Less, Greater, LessOrEqual, GreaterOrEqual, And, Or, Xor
};

static llvm::Optional<BinaryKind> binaryKind(llvm::StringRef op) {
  return llvm::StringSwitch<llvm::Optional<BinaryKind>>(op)
      .Case("Add", BinaryKind::Add)
      .Case("Sub", BinaryKind::Sub)
      .Case("Mul", BinaryKind::Mul)
      .Case("Div", BinaryKind::Div)
      .Case("Mod", BinaryKind::Mod)
      .Case("Pow", BinaryKind::Pow)
      .Case("Min", BinaryKind::Min)
      .Case("Max", BinaryKind::Max)
      .Case("Equal", BinaryKind::Equal)
      .Case("Less", BinaryKind::Less)
      .Case("Greater", BinaryKind::Greater)
      .Case("LessOrEqual", BinaryKind::LessOrEqual)
      .Case("GreaterOrEqual", BinaryKind::GreaterOrEqual)
      .Case("And", BinaryKind::And)
      .Case("Or", BinaryKind::Or)
      .Case("Xor", BinaryKind::Xor)
      .Default(llvm::None);
}

static bool isComparison(BinaryKind k) {
  return k >= BinaryKind::Equal;
}

/// Integer arithmetic as ONNX Runtime does it: Div truncates toward zero,
/// Mod takes the divisor's sign unless fmod. None on division by zero.
static llvm::Optional<int64_t> integerBinary(BinaryKind k, int64_t a, int64_t b,
                                             bool fmod) {
  switch (k) {
  case BinaryKind::Add:
    return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
  case BinaryKind::Sub:
    return static_cast<int64_t>(static_cast<uint64_t>(a) - static_cast<uint64_t>(b));
  case BinaryKind::Mul:
    return static_cast<int64_t>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
  case BinaryKind::Div:
    if (b == 0 || (a == INT64_MIN && b == -1))
      return llvm::None;
    return a / b;
  case BinaryKind::Mod: {
    if (b == 0 || (a == INT64_MIN && b == -1))
      return llvm::None;
    int64_t r = a % b;
    if (!fmod && r != 0 && ((r < 0) != (b < 0)))
      r += b;
    return r;
  }
  case BinaryKind::Pow:
    return static_cast<int64_t>(std::pow(static_cast<double>(a), static_cast<double>(b)));
  case BinaryKind::Min:
    return std::min(a, b);
  case BinaryKind::Max:
    return std::max(a, b);
  case BinaryKind::Equal:
    return a == b;
  case BinaryKind::Less:
    return a < b;
  case BinaryKind::Greater:
    return a > b;
  case BinaryKind::LessOrEqual:
    return a <= b;
  case BinaryKind::GreaterOrEqual:
    return a >= b;
  case BinaryKind::And:
    return (a != 0) && (b != 0);
  case BinaryKind::Or:
    return (a != 0) || (b != 0);
  case BinaryKind::Xor:
    return (a != 0) != (b != 0);
  }
  return llvm::None;
}

/// Floating-point arithmetic in double, rounded by the caller to the
/// tensor's precision. None for the logical ops, which take bools only.
static llvm::Optional<double> realBinary(BinaryKind k, double a, double b,
                                         bool) {
  switch (k) {
  case BinaryKind::Add:
    return a + b;
  case BinaryKind::Sub:
    return a - b;
  case BinaryKind::Mul:
    return a * b;
  case BinaryKind::Div:
    return a / b;
  case BinaryKind::Mod:
    return std::fmod(a, b);
  case BinaryKind::Pow:
    return std::pow(a, b);
  case BinaryKind::Min:
    return std::min(a, b);
  case BinaryKind::Max:
    return std::max(a, b);
  case BinaryKind::Equal:
    return a == b;
  case BinaryKind::Less:
    return a < b;
  case BinaryKind::Greater:
    return a > b;
  case BinaryKind::LessOrEqual:
    return a <= b;
  case BinaryKind::GreaterOrEqual:
    return a >= b;
  default:
    return llvm::None;
  }
}

static Result evalBinary(const NodeContext &c, BinaryKind kind) {
  // Min and Max are variadic; shape computations use them with two inputs.
  if (c.inputs.size() != 2 || !c.input(0) || !c.input(1))
    return llvm::None;
  const ConstantTensor &a = *c.input(0), &b = *c.input(1);
  if (a.elemType != b.elemType && kind != BinaryKind::Pow)
    return llvm::None;
  llvm::Optional<Dims> dims = broadcastDims({a.dims, b.dims});
  if (!dims)
    return llvm::None;
  Result out = c.allocate(isComparison(kind) ? TP::BOOL : a.elemType, *dims);
  if (!out)
    return llvm::None;
  bool fmod = c.intAttr("fmod", 0) != 0;
  // Pow may raise a float to an integer power: the base's type decides.
  bool real = a.isFloat() || b.isFloat();
  for (int64_t k = 0, n = out->numElements(); k < n; ++k) {
    int64_t ia = broadcastOffset(k, *dims, a.dims);
    int64_t ib = broadcastOffset(k, *dims, b.dims);
    if (real) {
      // f32 operands are exact in double; the result rounds back to f32 in
      // setReal, as one f32 operation would.
      llvm::Optional<double> v = realBinary(kind, a.realAt(ia), b.realAt(ib), fmod);
      if (!v)
        return llvm::None;
      out->setReal(k, *v);
    } else {
      llvm::Optional<int64_t> v =
          integerBinary(kind, a.integerAt(ia), b.integerAt(ib), fmod);
      if (!v)
        return llvm::None;
      out->setInteger(k, *v);
    }
  }
  return out;
}

static Result evalUnary(const NodeContext &c, llvm::StringRef op) {
  const ConstantTensor *x = c.input(0);
  if (!x)
    return llvm::None;
  Result out = c.allocate(x->elemType, x->dims);
  if (!out)
    return llvm::None;
  for (int64_t k = 0, n = x->numElements(); k < n; ++k) {
    if (op == "Not") {
      if (x->elemType != TP::BOOL)
        return llvm::None;
      out->setInteger(k, !x->ints[k]);
    } else if (op == "Neg" || op == "Abs") {
      if (x->isFloat())
        out->setReal(k, op == "Neg" ? -x->reals[k] : std::fabs(x->reals[k]));
      else
        out->setInteger(k, op == "Neg" ? -x->ints[k] : std::abs(x->ints[k]));
    } else {
      if (!x->isFloat())
        return llvm::None; // Sqrt, Floor, ... take floating-point inputs
      double v = x->reals[k];
      if (op == "Sqrt")
        v = std::sqrt(v);
      else if (op == "Floor")
        v = std::floor(v);
      else if (op == "Ceil")
        v = std::ceil(v);
      else if (op == "Reciprocal")
        v = 1.0 / v;
      else
        return llvm::None;
      out->setReal(k, v);
    }
  }
  return out;
}

static Result evalCast(const NodeContext &c) {
  const ConstantTensor *x = c.input(0);
  if (!x)
    return llvm::None;
  Result out = c.allocate(c.intAttr("to", 0), x->dims);
  if (!out)
    return llvm::None;
  for (int64_t k = 0, n = x->numElements(); k < n; ++k) {
    if (x->isFloat())
      out->setReal(k, x->reals[k]);
    else
      out->setInteger(k, x->ints[k]);
  }
  return out;
}

static Result evalWhere(const NodeContext &c) {
  const ConstantTensor *cond = c.input(0), *x = c.input(1), *y = c.input(2);
  if (!cond || !x || !y || cond->elemType != TP::BOOL ||
      x->elemType != y->elemType)
    return llvm::None;
  llvm::Optional<Dims> dims = broadcastDims({cond->dims, x->dims, y->dims});
  if (!dims)
    return llvm::None;
  Result out = c.allocate(x->elemType, *dims);
  if (!out)
    return llvm::None;
  for (int64_t k = 0, n = out->numElements(); k < n; ++k) {
    bool pick = cond->ints[broadcastOffset(k, *dims, cond->dims)];
    const ConstantTensor &src = pick ? *x : *y;
    int64_t at = broadcastOffset(k, *dims, src.dims);
    if (src.isFloat())
      out->setReal(k, src.reals[at]);
    else
      out->setInteger(k, src.ints[at]);
  }
  return out;
}

//===-- Data movement -----------------------------------------------------===//

/// Copies element `from` of `src` to element `to` of `dst` (same type).
static void copyElement(const ConstantTensor &src, int64_t from,
                        ConstantTensor &dst, int64_t to) {
  if (src.isFloat())
    dst.reals[to] = src.reals[from];
  else
    dst.ints[to] = src.ints[from];
}

/// The same data under other dims (Reshape, Unsqueeze, Squeeze, Identity).
static Result withDims(const NodeContext &c, const ConstantTensor &x,
                       llvm::ArrayRef<int64_t> dims) {
  Result out = c.allocate(x.elemType, dims);
  if (!out || out->numElements() != x.numElements())
    return llvm::None;
  out->ints = x.ints;
  out->reals = x.reals;
  return out;
}

/// Unsqueeze/Squeeze axes: an input from opset 13, an attribute before.
static llvm::Optional<Dims> axesOperand(const NodeContext &c) {
  if (c.opset >= 13)
    return c.input(1) ? intList(c.input(1)) : llvm::Optional<Dims>(Dims());
  llvm::Optional<Dims> axes = c.intsAttr("axes");
  return axes ? axes : llvm::Optional<Dims>(Dims());
}

static Result evalUnsqueeze(const NodeContext &c) {
  const ConstantTensor *x = c.input(0);
  llvm::Optional<Dims> axes = axesOperand(c);
  if (!x || !axes || axes->empty())
    return llvm::None;
  int64_t rank = x->dims.size() + axes->size();
  llvm::SmallVector<bool, 8> isNew(rank, false);
  for (int64_t a : *axes) {
    llvm::Optional<int64_t> n = normalizeAxis(a, rank);
    if (!n || isNew[*n])
      return llvm::None;
    isNew[*n] = true;
  }
  Dims dims;
  size_t next = 0;
  for (int64_t i = 0; i < rank; ++i)
    dims.push_back(isNew[i] ? 1 : x->dims[next++]);
  return withDims(c, *x, dims);
}

static Result evalSqueeze(const NodeContext &c) {
  const ConstantTensor *x = c.input(0);
  llvm::Optional<Dims> axes = axesOperand(c);
  if (!x || !axes)
    return llvm::None;
  int64_t rank = x->dims.size();
  llvm::SmallVector<bool, 8> drop(rank, false);
  for (int64_t a : *axes) {
    llvm::Optional<int64_t> n = normalizeAxis(a, rank);
    if (!n || x->dims[*n] != 1)
      return llvm::None;
    drop[*n] = true;
  }
  Dims dims;
  for (int64_t i = 0; i < rank; ++i)
    if (!(axes->empty() ? x->dims[i] == 1 : drop[i]))
      dims.push_back(x->dims[i]);
  return withDims(c, *x, dims);
}

static Result evalReshape(const NodeContext &c) {
  const ConstantTensor *x = c.input(0);
  llvm::Optional<Dims> target = intList(c.input(1));
  if (!x || !target)
    return llvm::None;
  bool allowZero = c.intAttr("allowzero", 0) != 0;
  Dims dims;
  int inferred = -1;
  int64_t known = 1;
  for (size_t i = 0; i < target->size(); ++i) {
    int64_t d = (*target)[i];
    if (d == 0 && !allowZero) {
      if (i >= x->dims.size())
        return llvm::None;
      d = x->dims[i];
    } else if (d == -1) {
      if (inferred >= 0)
        return llvm::None;
      inferred = i;
      dims.push_back(1);
      continue;
    } else if (d < 0) {
      return llvm::None;
    }
    known *= d;
    dims.push_back(d);
  }
  if (inferred >= 0) {
    if (known == 0 || x->numElements() % known)
      return llvm::None;
    dims[inferred] = x->numElements() / known;
  }
  return withDims(c, *x, dims);
}

static Result evalConcat(const NodeContext &c) {
  if (c.inputs.empty() || !c.input(0))
    return llvm::None;
  const ConstantTensor &first = *c.input(0);
  llvm::Optional<int64_t> axis =
      normalizeAxis(c.intAttr("axis", 0), first.dims.size());
  if (!axis)
    return llvm::None;
  Dims dims = first.dims;
  dims[*axis] = 0;
  for (const ConstantTensor *t : c.inputs) {
    if (!t || t->elemType != first.elemType || t->dims.size() != dims.size())
      return llvm::None;
    for (size_t i = 0; i < dims.size(); ++i)
      if (static_cast<int64_t>(i) != *axis && t->dims[i] != dims[i])
        return llvm::None;
    dims[*axis] += t->dims[*axis];
  }
  Result out = c.allocate(first.elemType, dims);
  if (!out)
    return llvm::None;
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < *axis; ++i)
    outer *= dims[i];
  for (size_t i = *axis + 1; i < dims.size(); ++i)
    inner *= dims[i];
  int64_t to = 0;
  for (int64_t o = 0; o < outer; ++o)
    for (const ConstantTensor *t : c.inputs) {
      int64_t block = t->dims[*axis] * inner;
      for (int64_t k = 0; k < block; ++k)
        copyElement(*t, o * block + k, *out, to++);
    }
  return out;
}

static Result evalGather(const NodeContext &c) {
  const ConstantTensor *data = c.input(0);
  llvm::Optional<Dims> indices = intList(c.input(1));
  if (!data || !indices)
    return llvm::None;
  llvm::Optional<int64_t> axis =
      normalizeAxis(c.intAttr("axis", 0), data->dims.size());
  if (!axis)
    return llvm::None;
  Dims dims(data->dims.begin(), data->dims.begin() + *axis);
  dims.append(c.input(1)->dims.begin(), c.input(1)->dims.end());
  dims.append(data->dims.begin() + *axis + 1, data->dims.end());
  Result out = c.allocate(data->elemType, dims);
  if (!out)
    return llvm::None;
  int64_t outer = 1, inner = 1, extent = data->dims[*axis];
  for (int64_t i = 0; i < *axis; ++i)
    outer *= data->dims[i];
  for (size_t i = *axis + 1; i < data->dims.size(); ++i)
    inner *= data->dims[i];
  int64_t to = 0;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t index : *indices) {
      if (index < -extent || index >= extent)
        return llvm::None;
      if (index < 0)
        index += extent;
      for (int64_t i = 0; i < inner; ++i)
        copyElement(*data, (o * extent + index) * inner + i, *out, to++);
    }
  return out;
}

/// Copies the elements of `x` that `start`/`step` per dimension select into
/// a tensor of `dims` (Slice and Expand's strided walks).
static void stridedCopy(const ConstantTensor &x, llvm::ArrayRef<int64_t> start,
                        llvm::ArrayRef<int64_t> step, ConstantTensor &out) {
  int64_t rank = out.dims.size();
  Dims strides(rank, 1);
  for (int64_t i = rank - 1; i > 0; --i)
    strides[i - 1] = strides[i] * x.dims[i];
  for (int64_t k = 0, n = out.numElements(); k < n; ++k) {
    int64_t rest = k, from = 0;
    for (int64_t i = rank; i-- > 0;) {
      int64_t coord = rest % out.dims[i];
      rest /= out.dims[i];
      from += (start[i] + coord * step[i]) * strides[i];
    }
    copyElement(x, from, out, k);
  }
}

static Result evalSlice(const NodeContext &c) {
  const ConstantTensor *x = c.input(0);
  if (!x)
    return llvm::None;
  llvm::Optional<Dims> starts, ends, axes, steps;
  if (c.opset >= 10) {
    starts = intList(c.input(1));
    ends = intList(c.input(2));
    axes = c.input(3) ? intList(c.input(3)) : llvm::None;
    steps = c.input(4) ? intList(c.input(4)) : llvm::None;
    if ((c.input(3) && !axes) || (c.input(4) && !steps))
      return llvm::None;
  } else {
    starts = c.intsAttr("starts");
    ends = c.intsAttr("ends");
    axes = c.intsAttr("axes");
  }
  if (!starts || !ends || starts->size() != ends->size())
    return llvm::None;
  int64_t rank = x->dims.size();
  if (!axes) {
    axes.emplace();
    for (size_t i = 0; i < starts->size(); ++i)
      axes->push_back(i);
  }
  if (!steps)
    steps = Dims(starts->size(), 1);
  if (axes->size() != starts->size() || steps->size() != starts->size())
    return llvm::None;
  Dims begin(rank, 0), stride(rank, 1), dims(x->dims.begin(), x->dims.end());
  for (size_t j = 0; j < axes->size(); ++j) {
    llvm::Optional<int64_t> a = normalizeAxis((*axes)[j], rank);
    int64_t step = (*steps)[j];
    if (!a || step == 0)
      return llvm::None;
    int64_t dim = x->dims[*a];
    int64_t s = (*starts)[j], e = (*ends)[j];
    if (s < 0)
      s = s < -dim ? 0 : s + dim;
    if (e < 0)
      e = e < -dim ? -1 : e + dim;
    int64_t count;
    if (step > 0) {
      s = std::clamp<int64_t>(s, 0, dim);
      e = std::clamp<int64_t>(e, 0, dim);
      count = e > s ? (e - s + step - 1) / step : 0;
    } else {
      s = std::clamp<int64_t>(s, -1, dim - 1);
      e = std::clamp<int64_t>(e, -1, dim - 1);
      count = s > e ? (s - e + (-step) - 1) / (-step) : 0;
    }
    begin[*a] = s;
    stride[*a] = step;
    dims[*a] = count;
  }
  Result out = c.allocate(x->elemType, dims);
  if (!out)
    return llvm::None;
  stridedCopy(*x, begin, stride, *out);
  return out;
}

/// Transpose by `perm` (default: reversed axes). Exporters transpose small
/// shape tensors too: torch's F.pad writes its pads through a [n, 2]
/// Transpose.
static Result evalTranspose(const NodeContext &c) {
  const ConstantTensor *x = c.input(0);
  if (!x)
    return llvm::None;
  int64_t rank = x->dims.size();
  Dims perm;
  if (llvm::Optional<Dims> p = c.intsAttr("perm"))
    perm = *p;
  else
    for (int64_t d = rank; d-- > 0;)
      perm.push_back(d);
  if (static_cast<int64_t>(perm.size()) != rank)
    return llvm::None;
  llvm::SmallVector<bool, 8> used(rank, false);
  Dims dims;
  for (int64_t p : perm) {
    if (p < 0 || p >= rank || used[p])
      return llvm::None;
    used[p] = true;
    dims.push_back(x->dims[p]);
  }
  Result out = c.allocate(x->elemType, dims);
  if (!out)
    return llvm::None;
  Dims inStrides(rank, 1);
  for (int64_t d = rank - 1; d > 0; --d)
    inStrides[d - 1] = inStrides[d] * x->dims[d];
  Dims idx(rank, 0);
  for (int64_t k = 0, n = out->numElements(); k < n; ++k) {
    int64_t from = 0;
    for (int64_t d = 0; d < rank; ++d)
      from += idx[d] * inStrides[perm[d]];
    copyElement(*x, from, *out, k);
    for (int64_t d = rank; d-- > 0;) {
      if (++idx[d] < dims[d])
        break;
      idx[d] = 0;
    }
  }
  return out;
}

static Result evalExpand(const NodeContext &c) {
  const ConstantTensor *x = c.input(0);
  llvm::Optional<Dims> shape = intList(c.input(1));
  if (!x || !shape)
    return llvm::None;
  llvm::Optional<Dims> dims = broadcastDims({x->dims, *shape});
  if (!dims)
    return llvm::None;
  Result out = c.allocate(x->elemType, *dims);
  if (!out)
    return llvm::None;
  for (int64_t k = 0, n = out->numElements(); k < n; ++k)
    copyElement(*x, broadcastOffset(k, *dims, x->dims), *out, k);
  return out;
}

static Result evalRange(const NodeContext &c) {
  const ConstantTensor *start = c.input(0), *limit = c.input(1),
                       *delta = c.input(2);
  if (!start || !limit || !delta || start->numElements() != 1 ||
      limit->numElements() != 1 || delta->numElements() != 1 ||
      start->elemType != limit->elemType || start->elemType != delta->elemType)
    return llvm::None;
  if (start->isFloat()) {
    double s = start->reals[0], l = limit->reals[0], d = delta->reals[0];
    if (d == 0)
      return llvm::None;
    int64_t n = std::max<double>(std::ceil((l - s) / d), 0);
    Result out = c.allocate(start->elemType, {n});
    if (!out)
      return llvm::None;
    for (int64_t k = 0; k < n; ++k)
      out->setReal(k, s + k * d);
    return out;
  }
  int64_t s = start->ints[0], l = limit->ints[0], d = delta->ints[0];
  if (d == 0)
    return llvm::None;
  int64_t span = l - s;
  int64_t n = d > 0 ? (span > 0 ? (span + d - 1) / d : 0)
                    : (span < 0 ? (-span + (-d) - 1) / (-d) : 0);
  Result out = c.allocate(start->elemType, {n});
  if (!out)
    return llvm::None;
  for (int64_t k = 0; k < n; ++k)
    out->setInteger(k, s + k * d);
  return out;
}

static Result evalConstantOfShape(const NodeContext &c) {
  llvm::Optional<Dims> shape = intList(c.input(0));
  if (!shape)
    return llvm::None;
  ConstantTensor fill = ConstantTensor::make(TP::FLOAT, {1});
  if (const onnx::AttributeProto *a = c.attr("value")) {
    llvm::Optional<ConstantTensor> v = ConstantTensor::fromProto(a->t());
    if (!v || v->numElements() != 1)
      return llvm::None;
    fill = std::move(*v);
  }
  Result out = c.allocate(fill.elemType, *shape);
  if (!out)
    return llvm::None;
  for (int64_t k = 0, n = out->numElements(); k < n; ++k)
    copyElement(fill, 0, *out, k);
  return out;
}

//===-- Dispatch: the Fold column of Ops.def ------------------------------===//

static Result evalBinaryOp(const NodeContext &c) {
  llvm::Optional<BinaryKind> kind = binaryKind(c.node.op_type());
  return kind ? evalBinary(c, *kind) : llvm::None;
}

static Result evalUnaryOp(const NodeContext &c) {
  return evalUnary(c, c.node.op_type());
}

static Result evalIdentity(const NodeContext &c) {
  return c.input(0) ? withDims(c, *c.input(0), c.input(0)->dims) : llvm::None;
}

using EvalFn = Result (*)(const NodeContext &);

/// The evaluator of each default-domain op whose Fold column names one.
static const llvm::StringMap<EvalFn> &evaluators() {
  static const llvm::StringMap<EvalFn> table = [] {
    llvm::StringMap<EvalFn> t;
#define Fold(fn) t[opType] = &fn;
#define NoFold (void)opType;
#define ZINC_OP(Op, Types, Backends, Gradient, Flops, Workspace, F)            \
  {                                                                            \
    llvm::StringRef opType = #Op;                                              \
    F                                                                          \
  }
#define ZINC_FOLD_ONLY_OP(Op, F)                                               \
  {                                                                            \
    llvm::StringRef opType = #Op;                                              \
    F                                                                          \
  }
#include "zinc/ops/Ops.def"
#undef Fold
#undef NoFold
    return t;
  }();
  return table;
}

bool canEvaluate(llvm::StringRef op) { return evaluators().count(op) != 0; }

llvm::Optional<ConstantTensor>
evaluateNode(const onnx::NodeProto &node,
             llvm::ArrayRef<const ConstantTensor *> inputs, int64_t opset,
             int64_t maxElements) {
  auto it = evaluators().find(node.op_type());
  if (it == evaluators().end())
    return llvm::None;
  return it->second(NodeContext{node, inputs, opset, maxElements});
}

} // namespace zinc::frontend
