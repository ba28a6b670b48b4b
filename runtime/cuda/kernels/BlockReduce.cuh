//===- BlockReduce.cuh - Warp and block sums of a fixed shape -------------===//
//
// Sums whose order depends only on the block's shape, so their bits do not
// change from run to run. Each caller instantiates the type it sums in
// (float for the row statistics, double for the loss and batch-norm sums).
//
//===----------------------------------------------------------------------===//
#ifndef ZINC_RUNTIME_CUDA_KERNELS_BLOCKREDUCE_CUH
#define ZINC_RUNTIME_CUDA_KERNELS_BLOCKREDUCE_CUH

namespace zinc::cuda {

/// The sum of every lane's `v`, in every lane: a butterfly, so each lane
/// adds the same two values at each step (a + b == b + a exactly).
template <typename T> __device__ __forceinline__ T warpSum(T v) {
#pragma unroll
  for (int m = 16; m > 0; m /= 2)
    v += __shfl_xor_sync(0xffffffffu, v, m);
  return v;
}

/// The block's sum of every thread's `v` (blockDim.x a multiple of 32), for
/// thread 0 only (0 in the others); the warps' sums are added in warp
/// order. `shared` holds 32 values.
template <typename T> static __device__ T blockSumToThread0(T v, T *shared) {
  int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  v = warpSum(v);
  __syncthreads(); // a previous call's reader is done with `shared`
  if (lane == 0)
    shared[warp] = v;
  __syncthreads();
  T total = 0;
  if (threadIdx.x == 0)
    for (int w = 0; w < int(blockDim.x / 32); ++w)
      total += shared[w];
  return total;
}

} // namespace zinc::cuda

#endif
