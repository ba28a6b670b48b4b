//===- CudaGatherColumnsTest.cpp - GatherColumns(Into): cuda vs cpu -------===//
//
// On every machine: the tile's destination indexing against naive loops,
// and the argument checks, which fail with the cpu's messages before any
// CUDA call. With a device: both ops against the cpu kernel on an output
// that already holds other tiles' columns (which must survive), with
// negative and repeated indices, for elements and tiles that move in
// 16-, 8-, 4-byte units and element by element.
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/kernels/MiscMath.h"
#include "test/unit/cuda/MiscTestHelpers.h"

using namespace zinc;
using namespace zinc::cuda;
using namespace zinc::cuda::misctest;
using cpu::test::attrs;
using cpu::test::intAttr;

namespace {

//===----------------------------------------------------------------------===//
// MiscMath.h on the host
//===----------------------------------------------------------------------===//

TEST(CudaGatherColumnsMath, DestinationIndexing) {
  const int64_t count = 5, width = 3, total = 10, column = 4;
  int64_t e = 0;
  for (int64_t row = 0; row < count; ++row)
    for (int64_t col = 0; col < width; ++col, ++e) {
      int64_t j, c;
      EXPECT_EQ(misc::gatherColumnsDest(e, width, total, column, j, c),
                row * total + column + col);
      EXPECT_EQ(j, row);
      EXPECT_EQ(c, col);
    }
}

//===----------------------------------------------------------------------===//
// Argument checks, before any CUDA call
//===----------------------------------------------------------------------===//

TEST(CudaGatherColumnsNoDevice, BadCallsFailBeforeLaunching) {
  DeviceTensor data = shapeOnly(DType::F32, {10, 4});
  DeviceTensor ids = shapeOnly(DType::I64, {3});
  DeviceTensor out = shapeOnly(DType::F32, {3, 6});
  DeviceTensor flat = shapeOnly(DType::F32, {10});
  EXPECT_EQ(errorText(runUnlaunched(runGatherColumns, "GatherColumns",
                                    attrs({}), {&flat, &ids}, {&out})),
            "GatherColumns: expects data [V, d], indices and an output");
  EXPECT_EQ(errorText(runUnlaunched(runGatherColumns, "GatherColumns",
                                    attrs({intAttr("outColumn", 4)}),
                                    {&data, &ids}, {&out})),
            "GatherColumns: output f32[3,6] cannot take columns [4, 8) of 3 "
            "rows");
  DeviceTensor out28 = shapeOnly(DType::F32, {2, 8});
  EXPECT_EQ(errorText(runUnlaunched(runGatherColumns, "GatherColumns",
                                    attrs({}), {&data, &ids}, {&out28})),
            "GatherColumns: output f32[2,8] cannot take columns [0, 4) of 3 "
            "rows");
  DeviceTensor out16 = shapeOnly(DType::F16, {3, 6});
  EXPECT_EQ(errorText(runUnlaunched(runGatherColumns, "GatherColumns",
                                    attrs({}), {&data, &ids}, {&out16})),
            "GatherColumns: output f16[3,6] cannot take columns [0, 4) of 3 "
            "rows");
  DeviceTensor fids = shapeOnly(DType::F32, {3});
  EXPECT_EQ(errorText(runUnlaunched(runGatherColumns, "GatherColumns",
                                    attrs({}), {&data, &fids}, {&out})),
            "unsupported: GatherColumns with indices of f32 on the cuda "
            "backend (i32, i64)");
  // Into writes input 2 in place: without it there is no output; with it
  // the checks pass (and a shape-only tensor has no memory).
  EXPECT_EQ(errorText(runUnlaunched(runGatherColumnsInto, "GatherColumnsInto",
                                    attrs({}), {&data, &ids}, {})),
            "GatherColumnsInto: expects data [V, d], indices and an output");
  EXPECT_EQ(errorText(runUnlaunched(runGatherColumnsInto, "GatherColumnsInto",
                                    attrs({intAttr("outColumn", 2)}),
                                    {&data, &ids, &out}, {})),
            "GatherColumnsInto: null device pointer");
}

TEST(CudaGatherColumnsNoDevice, KernelTableHasTheColumnOps) {
  EXPECT_EQ(lookupCudaKernel("zinc", "GatherColumns"), &runGatherColumns);
  EXPECT_EQ(lookupCudaKernel("zinc", "GatherColumnsInto"),
            &runGatherColumnsInto);
}

//===----------------------------------------------------------------------===//
// With a device: against the cpu kernel
//===----------------------------------------------------------------------===//

class CudaGatherColumns : public CudaMiscDevice {};

TEST_F(CudaGatherColumns, BothOpsMatchCpu) {
  struct Case {
    DType dtype;
    int64_t rows, width, total, column;
    std::vector<int64_t> ids;
    DType indexType;
  };
  const Case cases[] = {
      {DType::F32, 50, 8, 16, 8, {3, 7}, DType::I64}, // 16-byte units
      {DType::F32, 50, 8, 16, 0, {4}, DType::I32},
      {DType::BF16, 50, 4, 12, 4, {2, 9}, DType::I64}, // 8-byte units
      {DType::F16, 50, 6, 8, 2, {5, 3}, DType::I32},   // 4-byte units
      {DType::F16, 50, 3, 7, 4, {11}, DType::I64},     // element by element
      {DType::I64, 9, 5, 5, 0, {6}, DType::I32},       // the whole row
      {DType::U8, 20, 6, 10, 3, {2, 2, 2}, DType::I64}};
  for (const Case &c : cases)
    for (bool into : {false, true}) {
      const char *op = into ? "GatherColumnsInto" : "GatherColumns";
      SCOPED_TRACE(std::string(op) + " " + dtypeName(c.dtype).str() +
                   " width " + std::to_string(c.width) + " of " +
                   std::to_string(c.total) + " at " + std::to_string(c.column));
      AttributeList a = attrs({intAttr("outColumn", c.column)});
      OwnedTensor data = randomTensor(c.dtype, {c.rows, c.width}, rng, 0, 100,
                                      DrawKind::FlooredForIntegers);
      // Negative and repeated indices.
      std::vector<double> idx(numElements(c.ids));
      std::uniform_int_distribution<int64_t> pick(-c.rows, c.rows - 1);
      for (double &v : idx)
        v = double(pick(rng) % 5);
      OwnedTensor ids = tensorOf(c.indexType, c.ids, idx);
      std::vector<int64_t> outShape(c.ids);
      outShape.push_back(c.total);
      // Other tiles' columns, already there.
      OwnedTensor want = randomTensor(c.dtype, outShape, rng, 0, 100,
                                      DrawKind::FlooredForIntegers);
      ASSIGN_OR_FAIL(gdata, upload(data));
      ASSIGN_OR_FAIL(gids, upload(ids));
      ASSIGN_OR_FAIL(gout, upload(want));
      if (into) {
        ASSERT_NO_ERROR(
            runCpu(cpu::lookupZincKernel(op), op, a, {&data, &ids, &want}, {}));
        ASSERT_NO_ERROR(
            runDevice(runGatherColumnsInto, op, a, {&gdata, &gids, &gout}, {}));
      } else {
        ASSERT_NO_ERROR(
            runCpu(cpu::lookupZincKernel(op), op, a, {&data, &ids}, {&want}));
        ASSERT_NO_ERROR(
            runDevice(runGatherColumns, op, a, {&gdata, &gids}, {&gout}));
      }
      ASSIGN_OR_FAIL(got, download(gout));
      expectValuesClose(got, want, {0, 0});
    }
}

} // namespace
