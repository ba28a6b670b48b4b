//===- HostDevice.h - Math shared by cuda kernels and host tests ----------===//
//
// Functions marked ZINC_HD compile for the GPU inside .cu files and as plain
// C++ elsewhere, so the unit tests check a kernel's indexing and math on any
// machine, against the cpu kernels, even where no GPU is present.
//
//===----------------------------------------------------------------------===//
#ifndef ZINC_RUNTIME_CUDA_KERNELS_HOSTDEVICE_H
#define ZINC_RUNTIME_CUDA_KERNELS_HOSTDEVICE_H

#ifdef __CUDACC__
#define ZINC_HD __host__ __device__ inline
#else
#define ZINC_HD inline
#endif

#endif
