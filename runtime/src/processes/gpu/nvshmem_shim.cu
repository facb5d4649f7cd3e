// The NVSHMEM device functions an mgws kernel built with mgws-kernel-support's `nvshmem` feature
// calls (`device/kernel-support/src/nvshmem.rs`), as non-inline C functions over NVSHMEM's
// header-inline device API. mgws compiles this file with NVRTC (-rdc=true) when a run's PEs use
// the device API, and links it with the kernel's PTX and libnvshmem_device.a.
//
// NVRTC has no C++ standard library; NVSHMEM's headers name a few of its traits, which CCCL's
// <cuda/std/...> provide.
#include <cuda/std/cstdint>
#include <cuda/std/type_traits>
namespace std { using namespace cuda::std; }
#include <nvshmem.h>
#include <nvshmemx.h>

typedef unsigned long long u64;

extern "C" __device__ u64 mgws_nvshmem_fetch_add(u64 *w, u64 v, int pe) {
  return nvshmem_uint64_atomic_fetch_add((uint64_t *)w, (uint64_t)v, pe);
}
extern "C" __device__ void mgws_nvshmem_add(u64 *w, u64 v, int pe) {
  nvshmem_uint64_atomic_add((uint64_t *)w, (uint64_t)v, pe);
}
extern "C" __device__ u64 mgws_nvshmem_fetch(const u64 *w, int pe) {
  return nvshmem_uint64_atomic_fetch((const uint64_t *)w, pe);
}
extern "C" __device__ void mgws_nvshmem_set(u64 *w, u64 v, int pe) {
  nvshmem_uint64_atomic_set((uint64_t *)w, (uint64_t)v, pe);
}
extern "C" __device__ u64 mgws_nvshmem_fetch_or(u64 *w, u64 v, int pe) {
  return nvshmem_uint64_atomic_fetch_or((uint64_t *)w, (uint64_t)v, pe);
}
extern "C" __device__ u64 mgws_nvshmem_fetch_and(u64 *w, u64 v, int pe) {
  return nvshmem_uint64_atomic_fetch_and((uint64_t *)w, (uint64_t)v, pe);
}
extern "C" __device__ u64 mgws_nvshmem_compare_swap(u64 *w, u64 cond, u64 v, int pe) {
  return nvshmem_uint64_atomic_compare_swap((uint64_t *)w, (uint64_t)cond, (uint64_t)v, pe);
}
extern "C" __device__ u64 mgws_nvshmem_get(const u64 *w, int pe) {
  return nvshmem_uint64_g((const uint64_t *)w, pe);
}
extern "C" __device__ void mgws_nvshmem_release() {
  nvshmem_quiet();
  __threadfence_system();
}
