// The hand-written CUDA static MEMSET that `mgws bench gpu` measures the GPU kernels against: the
// same task semantics as mgws's MEMSET (task x adds x + 1 to slot x with one relaxed device-scope
// atomic, read from a 64-byte task struct, so lost and duplicated slots are visible), written as
// an expert would write a static kernel: block-per-task (32 threads, 4 lanes load the task as
// uint4, lane 0 does the atomic, two barriers per task, a contiguous share of the tasks per block)
// and flat thread-per-task, reading each task (`flat`) or making task i from a template as mgws's
// workers make an indexed job's (`flat-indexed`: the template, a kernel parameter here, with i
// added to its slot and value, so only the slots are memory traffic).
//
//   nvcc -O3 -arch=sm_90 static_memset.cu -o static_memset
//   ./static_memset TASKS WORKERS[,WORKERS...] REPS
//
// Prints one line per run: `reference,<variant>,<workers>,<tasks_per_s>,<bad_slots>`, where
// variant is `blockwise` (workers = blocks of 32 threads), `flat` or `flat-indexed` (workers = 0). A worker count
// above what is co-resident is skipped with a `skipped` line.
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>
#include <cuda_runtime.h>
#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { fprintf(stderr, "error: %s: %s\n", #x, cudaGetErrorString(e)); return 1; } } while (0)
struct __align__(16) Task { uint64_t tag, slot, value, pad[5]; };
__global__ void static_blockwise(const Task *tasks, uint64_t n, unsigned long long *out) {
  __shared__ Task cur;
  uint64_t per = (n + gridDim.x - 1) / gridDim.x, lo = blockIdx.x * per, hi = min(n, lo + per);
  for (uint64_t i = lo; i < hi; i++) {
    if (threadIdx.x < 4) reinterpret_cast<uint4 *>(&cur)[threadIdx.x] = reinterpret_cast<const uint4 *>(tasks + i)[threadIdx.x];
    __syncthreads();
    if (threadIdx.x == 0 && cur.tag == 1) atomicAdd(out + cur.slot, (unsigned long long)cur.value);
    __syncthreads();
  }
}
__global__ void flat(const Task *tasks, uint64_t n, unsigned long long *out) {
  for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n; i += (uint64_t)gridDim.x * blockDim.x) {
    Task t = tasks[i]; if (t.tag == 1) atomicAdd(out + t.slot, (unsigned long long)t.value);
  }
}
__global__ void flat_indexed(Task tmpl, uint64_t n, unsigned long long *out) {
  for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n; i += (uint64_t)gridDim.x * blockDim.x) {
    if (tmpl.tag == 1) atomicAdd(out + tmpl.slot + i, (unsigned long long)(tmpl.value + i));
  }
}
__global__ void init(Task *t, uint64_t n) {
  for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n; i += (uint64_t)gridDim.x * blockDim.x) { t[i].tag = 1; t[i].slot = i; t[i].value = i + 1; }
}
__global__ void check(const unsigned long long *out, uint64_t n, unsigned long long *bad) {
  for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n; i += (uint64_t)gridDim.x * blockDim.x)
    if (out[i] != i + 1) atomicAdd(bad, 1ull);
}
int main(int argc, char **argv) {
  if (argc != 4) { fprintf(stderr, "usage: %s TASKS WORKERS[,WORKERS...] REPS\n", argv[0]); return 2; }
  const uint64_t n = strtoull(argv[1], nullptr, 10);
  const int reps = atoi(argv[3]);
  std::vector<int> workers;
  for (char *tok = strtok(argv[2], ","); tok; tok = strtok(nullptr, ",")) workers.push_back(atoi(tok));
  if (n == 0 || reps <= 0 || workers.empty()) { fprintf(stderr, "error: TASKS, WORKERS and REPS must be positive\n"); return 2; }
  Task *t; unsigned long long *out, *bad;
  CK(cudaMalloc(&t, n * sizeof(Task))); CK(cudaMalloc(&out, n * 8)); CK(cudaMalloc(&bad, 8));
  init<<<1024, 256>>>(t, n); CK(cudaDeviceSynchronize());
  cudaDeviceProp p; CK(cudaGetDeviceProperties(&p, 0));
  int per_sm = 0; CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, static_blockwise, 32, 0));
  cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b); float ms; unsigned long long nbad;
  for (int rep = 0; rep < reps; rep++) {
    CK(cudaMemset(out, 0, n * 8)); CK(cudaMemset(bad, 0, 8));
    cudaEventRecord(a); flat<<<p.multiProcessorCount * 8, 256>>>(t, n, out); cudaEventRecord(b); CK(cudaEventSynchronize(b)); cudaEventElapsedTime(&ms, a, b);
    check<<<1024, 256>>>(out, n, bad); CK(cudaMemcpy(&nbad, bad, 8, cudaMemcpyDeviceToHost));
    printf("reference,flat,0,%.6e,%llu\n", n / (ms * 1e-3), nbad);
    Task tmpl = {1, 0, 1, {0, 0, 0, 0, 0}};
    CK(cudaMemset(out, 0, n * 8)); CK(cudaMemset(bad, 0, 8));
    cudaEventRecord(a); flat_indexed<<<p.multiProcessorCount * 8, 256>>>(tmpl, n, out); cudaEventRecord(b); CK(cudaEventSynchronize(b)); cudaEventElapsedTime(&ms, a, b);
    check<<<1024, 256>>>(out, n, bad); CK(cudaMemcpy(&nbad, bad, 8, cudaMemcpyDeviceToHost));
    printf("reference,flat-indexed,0,%.6e,%llu\n", n / (ms * 1e-3), nbad);
    for (int g : workers) {
      if (g > per_sm * p.multiProcessorCount) { printf("reference,blockwise,%d,skipped,0\n", g); continue; }
      CK(cudaMemset(out, 0, n * 8)); CK(cudaMemset(bad, 0, 8));
      cudaEventRecord(a); static_blockwise<<<g, 32>>>(t, n, out); cudaEventRecord(b); CK(cudaEventSynchronize(b)); cudaEventElapsedTime(&ms, a, b);
      check<<<1024, 256>>>(out, n, bad); CK(cudaMemcpy(&nbad, bad, 8, cudaMemcpyDeviceToHost));
      printf("reference,blockwise,%d,%.6e,%llu\n", g, n / (ms * 1e-3), nbad);
    }
  }
  return 0;
}
