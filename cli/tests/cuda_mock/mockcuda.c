/* A stand-in for libcuda.so that lets the CUDA backend's host logic run on a machine without a
 * GPU: device memory is host memory, streams are flags, and a "kernel launch" starts a thread that
 * plays one of a few scripted behaviours, chosen by MOCK_CUDA_MODE:
 *
 *   nodevice  cuInit fails with CUDA_ERROR_NO_DEVICE
 *   exit      (default) the kernel marks every worker exited and returns
 *   memset    as exit, and first runs MEMSET tasks itself: slot x of area 0 += x + 1, each
 *             device the tasks of its own queues' home ranges, through its own env's pointer
 *             to area 0 (so a data area's layout over several GPUs is exercised); beside CPU
 *             workers (the env's bridge set) it gives them nothing and then decides the end
 *             through the bridge, as side 0's bridge worker does once both sides are idle
 *   trap      the kernel faults: the stream reports CUDA_ERROR_LAUNCH_FAILED
 *   hang      the kernel of device d adds 1 to every device's idle counter and d + 1 steals
 *             (STEAL_INCREMENT) to the word of every device's first queue (through the env's
 *             pointers: a multi-process run shows whether each PE reaches each PE's memory),
 *             then makes no progress until the abort flag is set, and exits
 *   stuck     the kernel never exits, whatever the host writes
 *   error     the last device's kernel records an unknown-tag RunError in SharedState.error
 *             (through its env's pointer, PE 0's memory in a multi-process run); every kernel
 *             exits
 *
 * A kernel linked for NVSHMEM's device API (cuLink*, the window global mgws_pe_window set) reaches
 * the env's pointers into the window through the mock NVSHMEM's nvshmem_ptr, as its device calls
 * would, and in "memset" mode each PE runs its share of the tasks into its own copy of area 0.
 *
 * MOCK_CUDA_GPUS sets the number of GPUs (default 1); MOCK_CUDA_TRACE_ALLOCS prints every allocation and free; MOCK_CUDA_HOST_ATOMICS the value of
 * HOST_NATIVE_ATOMIC_SUPPORTED (default 0), MOCK_CUDA_P2P_ATOMICS the P2P native-atomic attribute
 * (default 1). Every launch's grid and the env it got are printed to stderr as "mock: ...".
 *
 * Virtual memory management (cuMemAddressReserve, cuMemCreate, cuMemMap, ...) reserves host
 * memory and checks the calls' sizes against MOCK_CUDA_GRANULARITY (default 4096): a slice off the
 * granularity, a map outside a reservation or an access set on an unmapped range fails.
 *
 * Only the functions the mgws host calls exist; the offsets below follow mgws_core::Env.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef int CUresult;
typedef int CUdevice;
typedef void *CUcontext;
typedef void *CUmodule;
typedef void *CUfunction;
typedef uint64_t CUdeviceptr;

enum {
    OK = 0,
    E_INVALID_VALUE = 1,
    E_NO_DEVICE = 100,
    E_NOT_FOUND = 500,
    E_NOT_READY = 600,
    E_PEER_ALREADY = 704,
    E_LAUNCH_FAILED = 719,
};

/* mgws_core::Env offsets (runtime/src/cuda/memory.rs's layout test asserts them). */
#define ENV_WORKERS 0
#define ENV_FIRST_WORKER 64
#define ENV_FIRST_QUEUE 100
#define PROGRESS_BYTES 48
#define STATS_BYTES 104
#define ENV_SHARED 136
#define ENV_QUEUE_HEADERS 144
#define ENV_DEVICE_IDLE 280
#define ENV_ABORT 344
#define ENV_BRIDGE 416
#define BRIDGE_DECISION 136
#define ENV_PROGRESS 488
#define ENV_STATS 496
#define ENV_AREAS 504
#define ENV_INITIAL 464
#define ENV_INITIAL_LEN 472
#define ENV_INITIAL_COUNTED_WORD 480
#define SHARED_ABORT 16
#define SHARED_ERROR 24
#define SHARED_EXITED 40

static const char *mode(void) {
    const char *m = getenv("MOCK_CUDA_MODE");
    return m ? m : "exit";
}
static int env_int(const char *name, int dflt) {
    const char *v = getenv(name);
    return v ? atoi(v) : dflt;
}

CUresult cuInit(unsigned flags) {
    (void)flags;
    return strcmp(mode(), "nodevice") == 0 ? E_NO_DEVICE : OK;
}
CUresult cuDriverGetVersion(int *v) { *v = 13000; return OK; }
CUresult cuDeviceGetCount(int *n) { *n = env_int("MOCK_CUDA_GPUS", 1); return OK; }
CUresult cuDeviceGet(CUdevice *d, int ordinal) {
    if (ordinal >= env_int("MOCK_CUDA_GPUS", 1)) return E_INVALID_VALUE;
    *d = ordinal;
    return OK;
}
CUresult cuDeviceGetName(char *name, int len, CUdevice d) {
    snprintf(name, len, "Mock GPU %d", d);
    return OK;
}
CUresult cuDeviceGetAttribute(int *v, int attr, CUdevice d) {
    (void)d;
    switch (attr) {
    case 16: *v = 4; break;   /* MULTIPROCESSOR_COUNT */
    case 75: *v = 9; break;   /* COMPUTE_CAPABILITY_MAJOR */
    case 76: *v = 0; break;   /* COMPUTE_CAPABILITY_MINOR */
    case 95: *v = 1; break;   /* COOPERATIVE_LAUNCH */
    case 97: *v = 232448; break; /* MAX_SHARED_MEMORY_PER_BLOCK_OPTIN */
    case 19: *v = 1; break;   /* CAN_MAP_HOST_MEMORY */
    case 86: *v = env_int("MOCK_CUDA_HOST_ATOMICS", 0); break; /* HOST_NATIVE_ATOMIC_SUPPORTED */
    case 102: *v = env_int("MOCK_CUDA_VMM", 1); break; /* VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED */
    default: *v = 0;
    }
    return OK;
}
CUresult cuDeviceCanAccessPeer(int *can, CUdevice a, CUdevice b) { *can = a != b; return OK; }
CUresult cuDeviceGetP2PAttribute(int *v, int attr, CUdevice a, CUdevice b) {
    (void)a; (void)b;
    *v = attr == 3 ? env_int("MOCK_CUDA_P2P_ATOMICS", 1) : 1;
    return OK;
}
static int ctx_tag[16];
CUresult cuDevicePrimaryCtxRetain(CUcontext *c, CUdevice d) { *c = &ctx_tag[d]; return OK; }
CUresult cuDevicePrimaryCtxRelease_v2(CUdevice d) { (void)d; return OK; }
CUresult cuCtxSetCurrent(CUcontext c) { (void)c; return OK; }
CUresult cuCtxSynchronize(void) { return OK; }
/* The per-thread local memory of the contexts (CU_LIMIT_STACK_SIZE, limit 0): 1,024 bytes until
 * raised. MOCK_CUDA_STACK_FAIL=1 makes raising it fail, as a driver does when it does not fit. */
static size_t stack_limit = 1024;
CUresult cuCtxGetLimit(size_t *v, int limit) { *v = limit == 0 ? stack_limit : 0; return OK; }
CUresult cuCtxSetLimit(int limit, size_t v) {
    if (limit != 0) return OK;
    if (env_int("MOCK_CUDA_STACK_FAIL", 0)) return 2; /* OUT_OF_MEMORY */
    fprintf(stderr, "mock: stack limit %zu -> %zu\n", stack_limit, v);
    stack_limit = v;
    return OK;
}
CUresult cuCtxEnablePeerAccess(CUcontext c, unsigned f) { (void)c; (void)f; return OK; }
CUresult cuGetErrorName(CUresult r, const char **s) {
    switch (r) {
    case E_LAUNCH_FAILED: *s = "CUDA_ERROR_LAUNCH_FAILED"; break;
    case E_NO_DEVICE: *s = "CUDA_ERROR_NO_DEVICE"; break;
    default: *s = "CUDA_ERROR_MOCK";
    }
    return OK;
}
CUresult cuMemGetInfo_v2(size_t *free_, size_t *total) { *free_ = 1 << 30; *total = 1 << 30; return OK; }

static char module_tag, function_tag, fill_tag;
CUresult cuModuleLoadDataEx(CUmodule *m, const void *image, unsigned n, void *o, void **v) {
    (void)n; (void)o; (void)v;
    if (!strstr((const char *)image, ".entry")) return 218; /* INVALID_PTX */
    int entries = 0;
    for (const char *p = image; (p = strstr(p, ".entry ")); p++) entries++;
    fprintf(stderr, "mock: module load (%d entries)\n", entries);
    *m = &module_tag;
    return OK;
}
/* The driver's JIT linker, for kernels over NVSHMEM's device API: the PTX must call the
 * mgws_nvshmem_ wrappers, the cubin must be the mock NVRTC's (mocknvrtc.c), the library a file. */
struct link { int ptx, wrappers, library; };
CUresult cuLinkCreate_v2(unsigned n, void *o, void **v, void **state) {
    (void)n; (void)o; (void)v;
    *state = calloc(1, sizeof(struct link));
    return OK;
}
CUresult cuLinkAddData_v2(void *state, int type, void *data, size_t size, const char *name,
                          unsigned n, void *o, void **v) {
    struct link *l = state;
    (void)name; (void)n; (void)o; (void)v;
    if (type == 1) { /* PTX */
        if (!strstr(data, ".entry") || !strstr(data, "mgws_nvshmem_")) return 218; /* INVALID_PTX */
        for (const char *p = data; (p = strstr(p, ".entry ")); p++) l->ptx++;
        return OK;
    }
    if (type == 0) { /* CUBIN */
        if (size < 9 || memcmp(data, "MOCKCUBIN", 9)) return 200; /* INVALID_IMAGE */
        l->wrappers = (int)size;
        return OK;
    }
    return E_INVALID_VALUE;
}
CUresult cuLinkAddFile_v2(void *state, int type, const char *path, unsigned n, void *o, void **v) {
    struct link *l = state;
    (void)n; (void)o; (void)v;
    if (type != 4 || access(path, R_OK) != 0) return 301; /* FILE_NOT_FOUND */
    l->library = 1;
    return OK;
}
static char linked_image[] = "MOCKLINKED";
CUresult cuLinkComplete(void *state, void **out, size_t *size) {
    struct link *l = state;
    if (!l->ptx || !l->wrappers || !l->library) return E_INVALID_VALUE; /* an input is missing */
    fprintf(stderr, "mock: linked module (%d entries, wrappers of %d bytes, device library)\n",
            l->ptx, l->wrappers);
    *out = linked_image;
    *size = sizeof linked_image;
    return OK;
}
CUresult cuLinkDestroy(void *state) { free(state); return OK; }
CUresult cuModuleLoadData(CUmodule *m, const void *image) {
    if (strcmp(image, linked_image)) return 200;
    *m = &module_tag;
    return OK;
}
/* The kernel's window global (mgws_core::PeWindow: base, shift, pes, me, reserved; 24 bytes),
 * which the kernel of the device-API transport routes its accesses by. MOCK_CUDA_WINDOW_BYTES
 * reports another size for it (a PTX built by another version). */
static struct { uint64_t base; uint32_t shift, pes, me, reserved; } pe_window;
CUresult cuModuleGetGlobal_v2(CUdeviceptr *p, size_t *bytes, CUmodule m, const char *name) {
    (void)m;
    if (strcmp(name, "mgws_pe_window")) return E_NOT_FOUND;
    *p = (CUdeviceptr)&pe_window;
    *bytes = (size_t)env_int("MOCK_CUDA_WINDOW_BYTES", (int)sizeof pe_window);
    return OK;
}
/* Where an env pointer leads: inside the window, PE e's memory, the own part (me) by the
 * pointer itself and the others through the mock NVSHMEM's mapping (as the kernel's NVSHMEM calls
 * reach them); elsewhere, the pointer itself. A kernel that routes its own part through the calls
 * (me names no part) says so once. */
static int own_calls;
static void *route(uint64_t addr) {
    if (!pe_window.pes || addr < pe_window.base) return (void *)addr;
    uint64_t part = (addr - pe_window.base) >> pe_window.shift;
    if (part >= pe_window.pes) return (void *)addr;
    if (part == pe_window.me) return (void *)addr;
    static void *(*ptr)(const void *, int);
    if (!ptr) {
        const char *lib = getenv("MGWS_NVSHMEM_LIBRARY");
        void *h = lib ? dlopen(lib, RTLD_NOW | RTLD_NOLOAD) : NULL;
        ptr = h ? (void *(*)(const void *, int))dlsym(h, "nvshmem_ptr") : NULL;
        if (!ptr) { fprintf(stderr, "mock: no NVSHMEM to route through\n"); abort(); }
    }
    int me = -1;
    int (*my_pe)(void) = (int (*)(void))dlsym(dlopen(getenv("MGWS_NVSHMEM_LIBRARY"), RTLD_NOW | RTLD_NOLOAD), "nvshmem_my_pe");
    if (my_pe) me = my_pe();
    if (me == (int)part && !own_calls++)
        fprintf(stderr, "mock: the kernel reaches its own PE through NVSHMEM's calls\n");
    return ptr((const void *)addr, (int)part);
}

CUresult cuModuleGetFunction(CUfunction *f, CUmodule m, const char *name) {
    (void)m;
    if (strncmp(name, "mgws_memset_worker_", 19) && strcmp(name, "mgws_memset_level") &&
        strcmp(name, "mgws_memset_fill_indexed"))
        return E_NOT_FOUND;
    fprintf(stderr, "mock: function %s\n", name);
    *f = strcmp(name, "mgws_memset_fill_indexed") ? &function_tag : &fill_tag;
    return OK;
}
CUresult cuModuleUnload(CUmodule m) { (void)m; return OK; }
CUresult cuFuncLoad(CUfunction f) { (void)f; return OK; }
CUresult cuFuncGetAttribute(int *v, int attr, CUfunction f) {
    (void)f;
    switch (attr) {
    case 0: *v = 1024; break; /* MAX_THREADS_PER_BLOCK */
    case 1: *v = 8; break;    /* SHARED_SIZE_BYTES (static) */
    case 3: *v = env_int("MOCK_CUDA_LOCAL_BYTES", 1120); break; /* LOCAL_SIZE_BYTES */
    case 4: *v = 40; break;   /* NUM_REGS */
    default: *v = 0;
    }
    return OK;
}
CUresult cuFuncSetAttribute(CUfunction f, int attr, int v) { (void)f; (void)attr; (void)v; return OK; }
CUresult cuOccupancyMaxActiveBlocksPerMultiprocessor(int *n, CUfunction f, int threads, size_t smem) {
    (void)f;
    int by_threads = 2048 / threads, by_smem = (int)(228 * 1024 / (smem + 1024));
    *n = by_threads < by_smem ? by_threads : by_smem;
    if (*n > 32) *n = 32;
    return OK;
}

/* MOCK_CUDA_TRACE_ALLOCS set: every allocation and free is printed ("mock: alloc device 4096"). */
static void trace_alloc(const char *what, size_t n) {
    if (getenv("MOCK_CUDA_TRACE_ALLOCS")) fprintf(stderr, "mock: %s %zu\n", what, n);
}
CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t n) {
    trace_alloc("alloc device", n);
    *p = (CUdeviceptr)malloc(n);
    return *p ? OK : 2;
}
CUresult cuMemFree_v2(CUdeviceptr p) { trace_alloc("free device", 0); free((void *)p); return OK; }
CUresult cuMemHostAlloc(void **p, size_t n, unsigned f) {
    (void)f;
    trace_alloc("alloc host", n);
    *p = malloc(n);
    return *p ? OK : 2;
}
CUresult cuMemFreeHost(void *p) { trace_alloc("free host", 0); free(p); return OK; }
CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr *d, void *p, unsigned f) {
    (void)f;
    *d = (CUdeviceptr)p;
    return OK;
}
/* Virtual memory management: one reservation at a time is enough for the host's use (each is
 * freed before the next run's). Handles are the allocation sizes, marked by the device. */
static size_t granularity(void) { return (size_t)env_int("MOCK_CUDA_GRANULARITY", 4096); }
CUresult cuMemGetAllocationGranularity(size_t *g, const void *prop, int option) {
    (void)prop; (void)option;
    *g = granularity();
    return OK;
}
#define MAX_RESERVED 64
static struct { CUdeviceptr base; size_t size, mapped; } reserved[MAX_RESERVED];
static pthread_mutex_t vmm_lock = PTHREAD_MUTEX_INITIALIZER;
CUresult cuMemAddressReserve(CUdeviceptr *p, size_t size, size_t align, CUdeviceptr addr,
                             unsigned long long flags) {
    (void)align; (void)addr; (void)flags;
    if (size == 0 || size % granularity()) return E_INVALID_VALUE;
    pthread_mutex_lock(&vmm_lock);
    CUresult r = 2; /* CUDA_ERROR_OUT_OF_MEMORY */
    for (int i = 0; i < MAX_RESERVED; i++) {
        if (reserved[i].base) continue;
        reserved[i].base = (CUdeviceptr)calloc(1, size);
        reserved[i].size = size;
        reserved[i].mapped = 0;
        *p = reserved[i].base;
        r = reserved[i].base ? OK : 2;
        break;
    }
    pthread_mutex_unlock(&vmm_lock);
    return r;
}
static int find_reserved(CUdeviceptr p, size_t n) {
    for (int i = 0; i < MAX_RESERVED; i++)
        if (reserved[i].base && p >= reserved[i].base && p + n <= reserved[i].base + reserved[i].size)
            return i;
    return -1;
}
CUresult cuMemAddressFree(CUdeviceptr p, size_t size) {
    pthread_mutex_lock(&vmm_lock);
    int i = find_reserved(p, size);
    if (i >= 0 && reserved[i].base == p) {
        free((void *)p);
        reserved[i].base = 0;
    }
    pthread_mutex_unlock(&vmm_lock);
    return i >= 0 ? OK : E_INVALID_VALUE;
}
CUresult cuMemCreate(unsigned long long *h, size_t size, const void *prop, unsigned long long f) {
    (void)prop; (void)f;
    if (size == 0 || size % granularity()) return E_INVALID_VALUE;
    *h = size;
    return OK;
}
CUresult cuMemRelease(unsigned long long h) { (void)h; return OK; }
CUresult cuMemMap(CUdeviceptr p, size_t size, size_t offset, unsigned long long h,
                  unsigned long long f) {
    (void)f;
    pthread_mutex_lock(&vmm_lock);
    int i = find_reserved(p, size);
    int ok = i >= 0 && offset == 0 && size == h && (p - reserved[i].base) % granularity() == 0;
    if (ok) reserved[i].mapped += size;
    pthread_mutex_unlock(&vmm_lock);
    return ok ? OK : E_INVALID_VALUE;
}
CUresult cuMemUnmap(CUdeviceptr p, size_t size) {
    pthread_mutex_lock(&vmm_lock);
    int i = find_reserved(p, size);
    if (i >= 0) reserved[i].mapped -= size;
    pthread_mutex_unlock(&vmm_lock);
    return i >= 0 ? OK : E_INVALID_VALUE;
}
CUresult cuMemSetAccess(CUdeviceptr p, size_t size, const void *desc, size_t count) {
    (void)desc;
    pthread_mutex_lock(&vmm_lock);
    int i = find_reserved(p, size);
    int ok = i >= 0 && count > 0 && reserved[i].mapped == reserved[i].size && size == reserved[i].size;
    pthread_mutex_unlock(&vmm_lock);
    return ok ? OK : E_INVALID_VALUE;
}
CUresult cuMemsetD8_v2(CUdeviceptr p, unsigned char v, size_t n) { memset((void *)p, v, n); return OK; }
CUresult cuMemcpyHtoD_v2(CUdeviceptr d, const void *s, size_t n) { memcpy((void *)d, s, n); return OK; }
CUresult cuMemcpyDtoH_v2(void *d, CUdeviceptr s, size_t n) { memcpy(d, (void *)s, n); return OK; }
CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr d, const void *s, size_t n, void *st) {
    (void)st;
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    memcpy((void *)d, s, n);
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    return OK;
}
CUresult cuMemcpyDtoHAsync_v2(void *d, CUdeviceptr s, size_t n, void *st) {
    (void)st;
    memcpy(d, (void *)s, n);
    return OK;
}

struct stream {
    volatile int busy;
    volatile int fault;
    /* Copies between GPUs queued on the stream and not yet waited for. */
    int copies;
    /* cuStreamWaitValue32: the word the stream's next kernel waits for (GEQ value), or NULL. */
    volatile uint32_t *gate;
    uint32_t gate_value;
};
CUresult cuStreamCreate(void **s, unsigned f) { (void)f; *s = calloc(1, sizeof(struct stream)); return OK; }
CUresult cuStreamDestroy_v2(void *s) { (void)s; /* leaked on purpose: a kernel may still run */ return OK; }
CUresult cuStreamQuery(void *s) {
    struct stream *st = s;
    if (st->fault) return E_LAUNCH_FAILED;
    return st->busy ? E_NOT_READY : OK;
}
/* The copies that wake the links between GPUs: logged as queued, and as done when their stream
 * is waited for, for the tests to count and order. */
CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr d, CUdeviceptr s, size_t n, void *stream) {
    memmove((void *)d, (const void *)s, n);
    ((struct stream *)stream)->copies++;
    fprintf(stderr, "mock: copy between GPUs, %zu bytes\n", n);
    return OK;
}
CUresult cuStreamSynchronize(void *s) {
    struct stream *st = s;
    if (st->copies) fprintf(stderr, "mock: %d copies between GPUs waited for\n", st->copies);
    st->copies = 0;
    while (st->busy) usleep(100);
    return st->fault ? E_LAUNCH_FAILED : OK;
}
/* MOCK_CUDA_NO_STREAM_WAIT=1: the driver refuses stream memory operations. */
CUresult cuStreamWaitValue32_v2(void *s, CUdeviceptr addr, uint32_t value, unsigned flags) {
    struct stream *st = s;
    if (env_int("MOCK_CUDA_NO_STREAM_WAIT", 0)) return 801; /* CUDA_ERROR_NOT_SUPPORTED */
    if (flags != 0) return 1; /* only CU_STREAM_WAIT_VALUE_GEQ (0) */
    st->gate = (volatile uint32_t *)addr;
    st->gate_value = value;
    return OK;
}
CUresult cuEventCreate(void **e, unsigned f) { (void)f; *e = calloc(1, sizeof(struct timespec)); return OK; }
CUresult cuEventRecord(void *e, void *s) { (void)s; clock_gettime(CLOCK_MONOTONIC, e); return OK; }
CUresult cuEventElapsedTime(float *ms, void *a, void *b) {
    struct timespec *x = a, *y = b;
    *ms = (float)((y->tv_sec - x->tv_sec) * 1e3 + (y->tv_nsec - x->tv_nsec) / 1e6);
    return OK;
}
CUresult cuEventQuery(void *e) { (void)e; return OK; }
CUresult cuEventDestroy_v2(void *e) { free(e); return OK; }

struct launch {
    struct stream *st;
    uint8_t *env;
    unsigned grid;
    unsigned device;
};

static uint64_t rd(const uint8_t *p) { uint64_t v; memcpy(&v, p, 8); return v; }

static void *kernel(void *arg) {
    struct launch *l = arg;
    if (l->st->gate) {
        /* Held by the launch gate: wait for the host to open it (at most 10 s). */
        int waited = 0;
        while (*l->st->gate < l->st->gate_value && waited < 10000) { usleep(1000); waited++; }
        if (*l->st->gate < l->st->gate_value) fprintf(stderr, "mock: the launch gate never opened\n");
        else fprintf(stderr, "mock: a kernel passed the gate\n");
        l->st->gate = NULL;
    }
    uint8_t *shared = route(rd(l->env + ENV_SHARED));
    volatile uint64_t *abort_flag = (volatile uint64_t *)(shared + SHARED_ABORT);
    uint64_t *exited = (uint64_t *)(shared + SHARED_EXITED);
    const char *m = mode();
    if (!strcmp(m, "trap")) {
        usleep(20000);
        l->st->fault = 1;
        l->st->busy = 0;
        return NULL;
    }
    /* The run's devices: those whose idle counter the env points to. */
    unsigned devices = 0;
    while (devices < 8 && rd(l->env + ENV_DEVICE_IDLE + 8 * devices)) devices++;
    if (!strcmp(m, "hang")) {
        for (unsigned e = 0; e < devices; e++) {
            uint64_t *idle = route(rd(l->env + ENV_DEVICE_IDLE + 8 * e));
            uint64_t *word = route(rd(l->env + ENV_QUEUE_HEADERS + 8 * e));
            __atomic_fetch_add(idle, 1, __ATOMIC_SEQ_CST);
            __atomic_fetch_add(word, (l->device + 1ull) << 40, __ATOMIC_SEQ_CST);
        }
        /* As a worker does: the env's abort flag (its GPU's copy), so that an abort that leaves
         * a copy unset hangs here. */
        volatile uint64_t *own = (volatile uint64_t *)route(rd(l->env + ENV_ABORT));
        while (!*own) usleep(1000);
    }
    if (!strcmp(m, "stuck")) {
        for (;;) pause();
    }
    if (!strcmp(m, "error") && l->device + 1 == (devices ? devices : 1)) {
        uint64_t e = (1ull << 60) | (3ull << 42) | 0xdead; /* RunError::pack(UnknownTag { worker: 3, tag }) */
        __atomic_store_n((uint64_t *)(shared + SHARED_ERROR), e, __ATOMIC_SEQ_CST);
        *abort_flag = 1;
    }
    /* Over the device-API transport (a window is set) each PE writes its own copy of area 0, and
     * each adds a share of every slot's value (below), reading only its own ranges' tasks. Otherwise each device runs the tasks of
     * its own queues' home ranges (Env::initial_range) through its own pointer to area 0, and
     * records them as run by its first worker. */
    int split = pe_window.pes != 0;
    if (!strcmp(m, "memset")) {
        /* Every initial task is a MemsetTask {index} (params[0] at byte 8); area 0 holds u64s. */
        uint64_t *slots = (uint64_t *)rd(l->env + ENV_AREAS);
        const uint8_t *tasks = (const uint8_t *)rd(l->env + ENV_INITIAL);
        uint64_t n = rd(l->env + ENV_INITIAL_LEN);
        /* Listed (all ones): task i at tasks + 64 i; else indexed: the template's word
         * `counted` (MEMSET's index) plus i (Env::initial_counted_word). */
        uint64_t counted = rd(l->env + ENV_INITIAL_COUNTED_WORD);
        fprintf(stderr, "mock: initial tasks %s\n", counted == ~0ull ? "listed" : "indexed");
        uint32_t fq[2], queues, first_worker;
        memcpy(fq, l->env + ENV_FIRST_QUEUE + 4 * l->device, 8);
        memcpy(&queues, l->env + ENV_FIRST_QUEUE + 4 * (devices ? devices : 1), 4);
        memcpy(&first_worker, l->env + ENV_FIRST_WORKER + 4 * l->device, 4);
        uint64_t own_lo = fq[0] * n / queues, own_hi = fq[1] * n / queues;
        uint64_t lo = split ? 0 : own_lo, hi = split ? n : own_hi;
        for (uint64_t i = lo; i < hi; i++) {
            /* A PE holds only its own ranges' tasks (RunFlags::INITIAL_OWN_DEVICE); task i of a
             * MEMSET run marks slot i, which stands in for the others'. */
            uint64_t x = !(i >= own_lo && i < own_hi) ? i
                         : counted == ~0ull         ? rd(tasks + 64 * i + 8)
                                                    : rd(tasks + 8 * counted) + i;
            if (!split) {
                slots[x] += x + 1;
                continue;
            }
            /* Every PE adds its share of x + 1 to every slot (device d: (x + 1) / devices, the
             * last one the rest): exact only if the copies' changes are added, not overwritten. */
            uint64_t share = (x + 1) / devices;
            slots[x] += l->device + 1 == devices ? x + 1 - share * (devices - 1) : share;
        }
        if (split) {
            lo = 0;
            hi = l->device == 0 ? n : 0;
        }
        /* Progress records: tasks_run of the device's first worker. */
        uint64_t ran = hi - lo;
        uint8_t *progress = (uint8_t *)rd(l->env + ENV_PROGRESS) + (uint64_t)first_worker * PROGRESS_BYTES;
        memcpy(progress + 8, &ran, 8);
        /* Statistics (if collected): tasks_run of the same worker. */
        uint8_t *stats = (uint8_t *)rd(l->env + ENV_STATS);
        if (stats) memcpy(stats + (uint64_t)first_worker * STATS_BYTES, &ran, 8);
    }
    uint64_t bridge = rd(l->env + ENV_BRIDGE);
    if (!strcmp(m, "memset") && bridge) {
        /* Side 0 sent the CPU workers nothing and is idle: no work is left anywhere. */
        __atomic_store_n((uint64_t *)(bridge + BRIDGE_DECISION), 1, __ATOMIC_RELEASE);
    }
    __atomic_fetch_add(exited, l->grid, __ATOMIC_SEQ_CST);
    usleep(5000);
    l->st->busy = 0;
    free(l);
    return NULL;
}

CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                   unsigned by, unsigned bz, unsigned smem, void *stream,
                                   void **params) {
    (void)f; (void)gy; (void)gz; (void)by; (void)bz;
    struct launch *l = malloc(sizeof *l);
    l->st = stream;
    l->env = (uint8_t *)*(uint64_t *)params[0];
    l->grid = gx;
    l->device = *(uint32_t *)params[2];
    fprintf(stderr, "mock: launch grid=%u block=%u smem=%u scratch=%u device=%u workers=%u\n", gx,
            bx, smem, *(uint32_t *)params[1], l->device, *(uint32_t *)(l->env + ENV_WORKERS));
    if (l->st->gate)
        fprintf(stderr, "mock: launch behind %s gate\n",
                *l->st->gate < l->st->gate_value ? "a closed" : "an open");
    l->st->busy = 1;
    pthread_t t;
    pthread_create(&t, NULL, kernel, l);
    pthread_detach(t);
    return OK;
}

/* mgws_core::LevelArgs offsets: config (56 bytes), frontier, frontier_len, out, out_capacity,
 * counters, areas. */
#define LA_FRONTIER 56
#define LA_FRONTIER_LEN 64
#define LA_COUNTERS 88
#define LA_AREAS 96

/* The kernel-per-level entry (a normal launch): in "memset" mode it runs the frontier's MEMSET
 * tasks and spawns nothing, so the host's loop ends after one level; the counters say how many
 * tasks ran. Synchronous (the stream is idle again when the launch returns), except in "trap"
 * mode (the stream reports CUDA_ERROR_LAUNCH_FAILED) and "hang" mode (a thread keeps the stream
 * busy until the host writes the level's abort counter, counters[3]). */
struct level_launch {
    struct stream *st;
    volatile uint64_t *counters;
};

static void *level_hang(void *arg) {
    struct level_launch *l = arg;
    while (!l->counters[3]) usleep(1000);
    usleep(5000);
    l->st->busy = 0;
    free(l);
    return NULL;
}

CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                        unsigned by, unsigned bz, unsigned smem, void *stream, void **params,
                        void **extra) {
    (void)gy; (void)gz; (void)by; (void)bz; (void)extra;
    if (f == (CUfunction)&fill_tag) {
        /* The fill entry (dst, template, first, count): dst[k] is the template with first + k
         * added to its word 1 (`TaskStruct::indexed`). */
        uint64_t *dst = (uint64_t *)*(uint64_t *)params[0];
        const uint64_t *template = (const uint64_t *)params[1];
        uint64_t first = *(uint64_t *)params[2], count = *(uint64_t *)params[3];
        fprintf(stderr, "mock: fill grid=%u block=%u first=%llu count=%llu\n", gx, bx,
                (unsigned long long)first, (unsigned long long)count);
        for (uint64_t k = 0; k < count; k++) {
            memcpy(dst + 8 * k, template, 64);
            dst[8 * k + 1] += first + k;
        }
        return OK;
    }
    const uint8_t *args = (const uint8_t *)*(uint64_t *)params[0];
    uint64_t n = rd(args + LA_FRONTIER_LEN);
    uint64_t *counters = (uint64_t *)rd(args + LA_COUNTERS);
    fprintf(stderr, "mock: level launch grid=%u block=%u smem=%u frontier=%llu\n", gx, bx, smem,
            (unsigned long long)n);
    struct stream *st = stream;
    if (!strcmp(mode(), "trap")) {
        st->fault = 1;
        return OK;
    }
    if (!strcmp(mode(), "hang")) {
        struct level_launch *l = malloc(sizeof *l);
        l->st = st;
        l->counters = counters;
        st->busy = 1;
        pthread_t t;
        pthread_create(&t, NULL, level_hang, l);
        pthread_detach(t);
        return OK;
    }
    if (!strcmp(mode(), "memset")) {
        uint64_t *slots = (uint64_t *)rd(args + LA_AREAS);
        const uint8_t *tasks = (const uint8_t *)rd(args + LA_FRONTIER);
        for (uint64_t i = 0; i < n; i++) {
            uint64_t x = rd(tasks + 64 * i + 8);
            slots[x] += x + 1;
        }
    }
    counters[2] = n;
    return OK;
}
