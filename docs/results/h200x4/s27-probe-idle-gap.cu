// Probe: the latency of a GPU's system-scope atomic on a peer GPU's memory after the links were
// idle for a given time (measured inside one kernel, one thread).
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>
#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("%s: %s\n", #x, cudaGetErrorString(e)); exit(1); } } while (0)
__device__ __forceinline__ unsigned long long gtime() {
    unsigned long long t; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t) :: "memory"); return t;
}
__device__ __forceinline__ unsigned long long atom(unsigned long long* p) {
    unsigned long long v;
    asm volatile("atom.add.sys.global.u64 %0, [%1], 1;" : "=l"(v) : "l"(p) : "memory");
    return v;
}
__global__ void gaps(unsigned long long* peer, const unsigned long long* gap_ns, int n, unsigned long long* out) {
    if (threadIdx.x != 0) return;
    unsigned long long sink = 0;
    for (int i = 0; i < n; i++) {
        sink += atom(peer);                       // the link is in use
        unsigned long long t = gtime();
        while (gtime() - t < gap_ns[i]) {}       // then idle for gap_ns
        unsigned long long t0 = gtime();
        unsigned long long v = atom(peer + 64);
        out[2 * n + i] = v; __threadfence();
        unsigned long long t1 = gtime();
        out[i] = t1 - t0;
        // a second one right after
        t0 = gtime(); v = atom(peer + 128); out[2 * n + i] += v; __threadfence(); t1 = gtime();
        out[n + i] = t1 - t0;
    }
    out[3 * n] = sink;
}
int main() {
    const int n = 16;
    unsigned long long h_gaps[n] = {0, 1000, 2000, 5000, 10000, 20000, 50000, 100000, 200000, 500000, 1000000, 2000000, 5000000, 10000000, 0, 1000};
    unsigned long long *peer, *g, *out, hout[4 * n];
    CK(cudaSetDevice(0)); CK(cudaMalloc(&peer, 1 << 16)); CK(cudaMemset(peer, 0, 1 << 16));
    CK(cudaSetDevice(1)); CK(cudaDeviceEnablePeerAccess(0, 0));
    CK(cudaMalloc(&g, sizeof h_gaps)); CK(cudaMalloc(&out, sizeof hout));
    CK(cudaMemcpy(g, h_gaps, sizeof h_gaps, cudaMemcpyHostToDevice));
    for (int rep = 0; rep < 3; rep++) {
        gaps<<<1, 32>>>(peer, g, n, out);
        CK(cudaDeviceSynchronize());
        CK(cudaMemcpy(hout, out, sizeof hout, cudaMemcpyDeviceToHost));
        printf("rep %d: idle gap -> GPU 1's atomic on GPU 0, then one more (us)\n", rep);
        for (int i = 0; i < n; i++) printf("  gap %9.1f us: %8.2f %8.2f\n", h_gaps[i] / 1e3, hout[i] / 1e3, hout[n + i] / 1e3);
    }
    return 0;
}
