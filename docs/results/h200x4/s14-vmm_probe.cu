// Where does a MEMSET task lose time on 4 GPUs? Each GPU streams 2^26 64-byte tasks from its own
// memory and adds to its own slot array; buffers from cudaMalloc or from CUDA's virtual memory
// management (one GPU's allocation, or one range split over all GPUs as mgws's SplitBuffer).
// Build: nvcc -O3 -arch=sm_90 s14-vmm_probe.cu -lcuda (raw output: s14-callA.txt)
#include <cstdio>
#include <cstdint>
#include <cstring>
#include <cuda.h>
#include <cuda_runtime.h>
#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("ERR %s: %s (line %d)\n", #x, cudaGetErrorString(e), __LINE__); exit(1);} } while (0)
#define CU(x) do { CUresult e = (x); if (e != CUDA_SUCCESS) { const char *s; cuGetErrorString(e, &s); printf("ERR %s: %s (line %d)\n", #x, s, __LINE__); exit(1);} } while (0)
struct __align__(16) Task { uint64_t tag, slot, value, pad[5]; };
template <bool SYS> __device__ __forceinline__ void add(unsigned long long *p, unsigned long long v) {
  if (SYS) atomicAdd_system(p, v); else atomicAdd(p, v);
}
// One warp per block, each block a contiguous home range, 32 tasks per step (mgws's lean static).
template <bool SYS> __global__ void ranged(const Task *tasks, uint64_t n, unsigned long long *out) {
  uint64_t per = (n + gridDim.x - 1) / gridDim.x, lo = blockIdx.x * per, hi = min(n, lo + per);
  for (uint64_t i = lo + threadIdx.x; i < hi; i += 32) {
    uint64_t tag = tasks[i].tag, slot = tasks[i].slot, value = tasks[i].value;
    if (tag == 1) add<SYS>(out + slot, value);
  }
}
template <bool SYS> __global__ void flat(const Task *tasks, uint64_t n, unsigned long long *out) {
  for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n; i += (uint64_t)gridDim.x * blockDim.x) {
    uint64_t tag = tasks[i].tag, slot = tasks[i].slot, value = tasks[i].value;
    if (tag == 1) add<SYS>(out + slot, value);
  }
}
__global__ void init(Task *t, uint64_t n, uint64_t base) {
  for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n; i += (uint64_t)gridDim.x * blockDim.x) { t[i].tag = 1; t[i].slot = i; t[i].value = base + i + 1; }
}
__global__ void check(const unsigned long long *out, uint64_t n, uint64_t base, unsigned long long *bad) {
  for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n; i += (uint64_t)gridDim.x * blockDim.x)
    if (out[i] != base + i + 1) atomicAdd(bad, 1ull);
}
enum Mode { MALLOC, VMM_OWN, VMM_ALL, VMM_SPLIT };
const char *mode_name[] = {"malloc", "vmm-own", "vmm-all", "vmm-split"};
static int ngpu;
static size_t gran(int dev, bool rec) {
  CUmemAllocationProp p; memset(&p, 0, sizeof p);
  p.type = CU_MEM_ALLOCATION_TYPE_PINNED; p.location.type = CU_MEM_LOCATION_TYPE_DEVICE; p.location.id = dev;
  size_t g; CU(cuMemGetAllocationGranularity(&g, &p, rec ? CU_MEM_ALLOC_GRANULARITY_RECOMMENDED : CU_MEM_ALLOC_GRANULARITY_MINIMUM));
  return g;
}
// `bytes` per GPU for `gpus` GPUs: returns each GPU's pointer.
static void alloc(Mode m, int gpus, size_t bytes, void **ptrs) {
  if (m == MALLOC) { for (int d = 0; d < gpus; d++) { CK(cudaSetDevice(d)); CK(cudaMalloc(&ptrs[d], bytes)); } return; }
  size_t g = gran(0, false); bytes = (bytes + g - 1) / g * g;
  CUdeviceptr base;
  int slices = (m == VMM_SPLIT) ? gpus : 1;
  int ranges = (m == VMM_SPLIT) ? 1 : gpus;
  for (int r = 0; r < ranges; r++) {
    CK(cudaSetDevice(r));
    CU(cuMemAddressReserve(&base, bytes * slices, 0, 0, 0));
    for (int s = 0; s < slices; s++) {
      int dev = (m == VMM_SPLIT) ? s : r;
      CUmemAllocationProp p; memset(&p, 0, sizeof p);
      p.type = CU_MEM_ALLOCATION_TYPE_PINNED; p.location.type = CU_MEM_LOCATION_TYPE_DEVICE; p.location.id = dev;
      CUmemGenericAllocationHandle h; CU(cuMemCreate(&h, bytes, &p, 0));
      CU(cuMemMap(base + s * bytes, bytes, 0, h, 0));
      ptrs[dev] = (void *)(base + s * bytes);
    }
    CUmemAccessDesc a[8]; int na = 0;
    for (int d = 0; d < ngpu; d++) {
      if (m == VMM_OWN && d != r) continue;
      memset(&a[na], 0, sizeof a[na]); a[na].location.type = CU_MEM_LOCATION_TYPE_DEVICE; a[na].location.id = d;
      a[na].flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE; na++;
    }
    CU(cuMemSetAccess(base, bytes * slices, a, na));
  }
}
int main(int argc, char **argv) {
  CK(cudaGetDeviceCount(&ngpu)); if (ngpu > 8) ngpu = 8;
  const uint64_t n = 1ull << 26;
  printf("%d GPUs; granularity minimum %zu, recommended %zu\n", ngpu, gran(0, false), gran(0, true));
  int sms; CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  for (int peer = 0; peer < 2; peer++) {
    if (peer) { for (int d = 0; d < ngpu; d++) { CK(cudaSetDevice(d)); for (int q = 0; q < ngpu; q++) if (q != d) CK(cudaDeviceEnablePeerAccess(q, 0)); } printf("== peer access enabled between every pair\n"); }
    for (int mi = 0; mi < 4; mi++) {
      Mode m = (Mode)mi;
      if (peer && m != MALLOC) continue;
      for (int gpus : {1, ngpu}) {
        if (m == VMM_SPLIT && gpus == 1) continue;
        void *tp[8], *op[8];
        alloc(m, gpus, n * sizeof(Task), tp); alloc(m, gpus, n * 8, op);
        unsigned long long *bad[8]; cudaEvent_t a[8], b[8];
        for (int d = 0; d < gpus; d++) { CK(cudaSetDevice(d)); init<<<1024, 256>>>((Task *)tp[d], n, d * n); CK(cudaMalloc(&bad[d], 8)); cudaEventCreate(&a[d]); cudaEventCreate(&b[d]); }
        for (int d = 0; d < gpus; d++) { CK(cudaSetDevice(d)); CK(cudaDeviceSynchronize()); }
        for (int k = 0; k < 4; k++) {
          const char *kn[] = {"ranged.gpu", "ranged.sys", "flat.gpu", "flat.sys"};
          for (int rep = 0; rep < 3; rep++) {
            for (int d = 0; d < gpus; d++) { CK(cudaSetDevice(d)); CK(cudaMemset(op[d], 0, n * 8)); CK(cudaMemset(bad[d], 0, 8)); CK(cudaDeviceSynchronize()); }
            for (int d = 0; d < gpus; d++) {
              CK(cudaSetDevice(d)); cudaEventRecord(a[d]);
              Task *t = (Task *)tp[d]; unsigned long long *o = (unsigned long long *)op[d];
              switch (k) {
                case 0: ranged<false><<<sms * 32, 32>>>(t, n, o); break;
                case 1: ranged<true><<<sms * 32, 32>>>(t, n, o); break;
                case 2: flat<false><<<sms * 8, 256>>>(t, n, o); break;
                case 3: flat<true><<<sms * 8, 256>>>(t, n, o); break;
              }
              cudaEventRecord(b[d]);
            }
            printf("%-9s gpus=%d %-10s", mode_name[m], gpus, kn[k]);
            unsigned long long tb = 0;
            for (int d = 0; d < gpus; d++) {
              CK(cudaSetDevice(d)); CK(cudaEventSynchronize(b[d])); float ms; cudaEventElapsedTime(&ms, a[d], b[d]);
              check<<<1024, 256>>>((unsigned long long *)op[d], n, d * n, bad[d]); unsigned long long nb; CK(cudaMemcpy(&nb, bad[d], 8, cudaMemcpyDeviceToHost)); tb += nb;
              printf(" %.3f", ms);
            }
            printf(" ms/GPU  bad=%llu\n", tb);
          }
        }
        // Leaks the buffers on purpose (the process is short); free the plain ones to keep room.
        if (m == MALLOC) for (int d = 0; d < gpus; d++) { CK(cudaSetDevice(d)); cudaFree(tp[d]); cudaFree(op[d]); }
      }
    }
  }
  return 0;
}
