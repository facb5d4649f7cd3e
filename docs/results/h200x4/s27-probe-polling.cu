// Probe: a GPU's system-scope atomic on a peer GPU's memory (NVLink): its latency alone, and
// while every SM of the issuing GPU (or of both) polls words on the peer with loads in a loop.
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>
#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("%s: %s\n", #x, cudaGetErrorString(e)); exit(1); } } while (0)

__device__ __forceinline__ unsigned long long gtime() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t) :: "memory");
    return t;
}
// n atomics, each one's address depending on the one before (the values stay below 2^40).
__global__ void probe(unsigned long long* target, unsigned long long* out, int n, volatile int* start) {
    if (threadIdx.x != 0) return;
    while (*start == 0) {}
    unsigned long long v = 0;
    unsigned long long t0 = gtime();
    for (int i = 0; i < n; i++) {
        asm volatile("atom.add.sys.global.u64 %0, [%1], 1;" : "=l"(v) : "l"(target + (v >> 40)) : "memory");
    }
    out[1] = v;
    __threadfence();
    unsigned long long t1 = gtime();
    out[0] = t1 - t0;
}
// Every block's lane 0 loads words of `peer` in a loop while *stop is 0.
__global__ void storm(unsigned long long* peer, volatile int* stop, unsigned long long* sink, int pause) {
    if (threadIdx.x != 0) return;
    unsigned long long acc = 0;
    int i = blockIdx.x;
    while (*stop == 0) {
        unsigned long long v;
        asm volatile("ld.relaxed.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(peer + 16 * (i & 255)) : "memory");
        acc += v; i += 7;
        if (pause) __nanosleep(pause);
    }
    sink[blockIdx.x] = acc;
}

int main() {
    int ngpu; CK(cudaGetDeviceCount(&ngpu));
    unsigned long long* buf[8]; unsigned long long* out[8]; unsigned long long* sink[8];
    int* flags; // host-mapped: [0] start, [1] stop
    CK(cudaHostAlloc(&flags, 64, cudaHostAllocMapped | cudaHostAllocPortable));
    unsigned long long* hout; CK(cudaMallocHost(&hout, 64));
    cudaStream_t s[8][2];
    for (int d = 0; d < 2; d++) {
        CK(cudaSetDevice(d));
        for (int p = 0; p < ngpu; p++) if (p != d) CK(cudaDeviceEnablePeerAccess(p, 0));
        CK(cudaMalloc(&buf[d], 1 << 20)); CK(cudaMemset(buf[d], 0, 1 << 20));
        CK(cudaMalloc(&out[d], 64)); CK(cudaMalloc(&sink[d], 1 << 16));
        CK(cudaStreamCreateWithFlags(&s[d][0], cudaStreamNonBlocking));
        CK(cudaStreamCreateWithFlags(&s[d][1], cudaStreamNonBlocking));
    }
    // case: storm on none / GPU 1 / both GPUs; probe GPU 1 -> GPU 0 with n = 1 and n = 17.
    const char* names[] = {"no storm", "GPU 1's blocks poll GPU 0", "both GPUs poll each other",
                           "GPU 1 polls GPU 0, 1 us pause", "both poll, 1 us pause", "GPU 0's blocks poll GPU 0 (local)"};
    for (int rep = 0; rep < 3; rep++)
    for (int c = 0; c < 6; c++) {
        double lat[2];
        int ns[2] = {1, 17};
        for (int k = 0; k < 2; k++) {
            flags[0] = 0; flags[1] = 0;
            int pause = (c == 3 || c == 4) ? 1000 : 0;
            if (c == 1 || c == 2 || c == 3 || c == 4) { CK(cudaSetDevice(1)); storm<<<1584, 32, 0, s[1][1]>>>(buf[0], flags + 1, sink[1], pause); }
            if (c == 2 || c == 4) { CK(cudaSetDevice(0)); storm<<<1584, 32, 0, s[0][1]>>>(buf[1], flags + 1, sink[0], pause); }
            if (c == 5) { CK(cudaSetDevice(0)); storm<<<1584, 32, 0, s[0][1]>>>(buf[0], flags + 1, sink[0], 0); }
            CK(cudaSetDevice(1));
            probe<<<1, 32, 0, s[1][0]>>>(buf[0] + 8192, out[1], ns[k], flags);
            // let the storm run a while, then start the probe
            volatile long spin = 0; for (long i = 0; i < 20000000; i++) spin += i;
            __sync_synchronize(); flags[0] = 1; __sync_synchronize();
            CK(cudaStreamSynchronize(s[1][0]));
            flags[1] = 1; __sync_synchronize();
            CK(cudaSetDevice(0)); CK(cudaDeviceSynchronize());
            CK(cudaSetDevice(1)); CK(cudaDeviceSynchronize());
            CK(cudaMemcpy(hout, out[1], 16, cudaMemcpyDeviceToHost));
            lat[k] = hout[0] / 1e3;
        }
        printf("%-36s 1 atomic %8.2f us, 17 chained %8.2f us: %6.2f us each\n", names[c], lat[0], lat[1], (lat[1] - lat[0]) / 16);
    }
    return 0;
}
