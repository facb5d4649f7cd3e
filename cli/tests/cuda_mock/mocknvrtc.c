/* A stand-in for NVRTC (libnvrtc.so) beside the stand-in libcuda (mockcuda.c): it "compiles" the
 * NVSHMEM wrappers mgws builds for GPU PEs over the device API. It checks what a real compile
 * needs (relocatable device code for an sm_ architecture, NVSHMEM's headers and CCCL's on the
 * include path, the wrappers' names in the source) and returns a cubin that the mock linker
 * accepts ("MOCKCUBIN..."). MOCK_NVRTC_FAIL=1 fails every compile with a log. Each compile is
 * printed to stderr as "mock-nvrtc: ...".
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct program { char *source; char log[512]; int ok; };

int nvrtcVersion(int *major, int *minor) { *major = 13; *minor = 0; return 0; }

int nvrtcCreateProgram(struct program **p, const char *src, const char *name, int n,
                       const char *const *headers, const char *const *includes) {
    (void)name; (void)n; (void)headers; (void)includes;
    *p = calloc(1, sizeof **p);
    (*p)->source = strdup(src);
    return 0;
}

static int has_file(int n, const char *const *opts, const char *rel) {
    char path[1024];
    for (int i = 0; i < n; i++) {
        if (strncmp(opts[i], "-I", 2)) continue;
        snprintf(path, sizeof path, "%s/%s", opts[i] + 2, rel);
        if (access(path, R_OK) == 0) return 1;
    }
    return 0;
}

int nvrtcCompileProgram(struct program *p, int n, const char *const *opts) {
    int rdc = 0, arch = 0;
    for (int i = 0; i < n; i++) {
        if (!strcmp(opts[i], "-rdc=true")) rdc = 1;
        if (!strncmp(opts[i], "--gpu-architecture=sm_", 22)) arch = 1;
    }
    const char *why = getenv("MOCK_NVRTC_FAIL") ? "mock compile failure (MOCK_NVRTC_FAIL)"
                      : !rdc ? "not relocatable device code (-rdc=true)"
                      : !arch ? "no --gpu-architecture=sm_XY"
                      : !has_file(n, opts, "nvshmem.h") ? "cannot open source file \"nvshmem.h\""
                      : !has_file(n, opts, "cuda/std/cstdint") ? "cannot open source file \"cuda/std/cstdint\""
                      : !strstr(p->source, "mgws_nvshmem_fetch_add") ? "no wrappers in the source"
                      : NULL;
    if (why) {
        snprintf(p->log, sizeof p->log, "shim.cu: catastrophic error: %s", why);
        fprintf(stderr, "mock-nvrtc: compile failed: %s\n", why);
        return 6; /* NVRTC_ERROR_COMPILATION */
    }
    fprintf(stderr, "mock-nvrtc: compiled the NVSHMEM wrappers\n");
    p->ok = 1;
    return 0;
}

int nvrtcGetProgramLogSize(struct program *p, size_t *n) { *n = strlen(p->log) + 1; return 0; }
int nvrtcGetProgramLog(struct program *p, char *out) { strcpy(out, p->log); return 0; }
int nvrtcGetCUBINSize(struct program *p, size_t *n) { *n = p->ok ? 16 : 0; return p->ok ? 0 : 6; }
int nvrtcGetCUBIN(struct program *p, char *out) {
    if (!p->ok) return 6;
    memcpy(out, "MOCKCUBIN-wraps.", 16);
    return 0;
}
int nvrtcDestroyProgram(struct program **p) {
    free((*p)->source);
    free(*p);
    *p = NULL;
    return 0;
}
