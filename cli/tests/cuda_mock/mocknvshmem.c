/* A stand-in for NVSHMEM's host library (libnvshmem_host.so.3) for GPU PE processes on a machine
 * without a GPU, beside the stand-in libcuda (mockcuda.c, whose device memory is host memory):
 * the symmetric heap is one shared memory file per PE and allocation, which nvshmem_ptr maps into
 * the asking process, and the barrier is a set of marker files. The unique ID carries a random
 * token that names the files. The struct versions mgws passes are checked against NVSHMEM 3's
 * (a wrong layout fails the init with status 7).
 *
 * The files live in $MOCK_NVSHMEM_DIR (default /dev/shm). MOCK_NVSHMEM_FAIL_INIT=k makes the init
 * of PE k fail, MOCK_NVSHMEM_FAIL_MALLOC=k the allocation of PE k, MOCK_NVSHMEM_HANG_INIT=k the
 * init of PE k never return (a bootstrap that waits for a peer forever), MOCK_NVSHMEM_EXIT_INIT=k
 * PE k exit with status 3 in its init (as NVSHMEM does on some fatal errors), and
 * MOCK_NVSHMEM_HANG_FINALIZE=k the finalize of PE k never return (a collective teardown whose
 * peer is gone); the other PEs go on, as far as they can. Calls are printed to stderr as "mock-nvshmem: ...".
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

typedef struct { int version; char internal[124]; } uniqueid_t;
typedef struct { int version; uniqueid_t *id; int myrank; int nranks; } uid_args_t;
typedef struct { int version; uid_args_t uid_args; char content[96]; } init_args_t;
typedef struct { int version; void *mpi_comm; init_args_t args; } init_attr_t;

static unsigned long long token;
static int me = -1, npes = 0, barriers = 0, allocs = 0;
static struct { char *base; size_t size; } heap[16];

static const char *dir(void) {
    const char *d = getenv("MOCK_NVSHMEM_DIR");
    return d ? d : "/dev/shm";
}

static void name_of(char *out, size_t n, int pe, int alloc) {
    snprintf(out, n, "%s/mgws-mock-nvshmem-%llx-%d-%d", dir(), token, alloc, pe);
}

static void barrier_name(char *out, size_t n, int k, int pe) {
    snprintf(out, n, "%s/mgws-mock-nvshmem-%llx-barrier-%d-%d", dir(), token, k, pe);
}

int nvshmemx_get_uniqueid(uniqueid_t *id) {
    if (id->version != (1 << 16) + (int)sizeof(uniqueid_t)) return 7;
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    unsigned long long tok = ((unsigned long long)getpid() << 32) ^ (unsigned long long)t.tv_nsec;
    memcpy(id->internal, &tok, sizeof tok);
    return 0;
}

int nvshmemx_set_attr_uniqueid_args(int rank, int nranks, const uniqueid_t *id, init_attr_t *attr) {
    if (attr->version != (1 << 16) + (int)sizeof(init_attr_t) ||
        attr->args.version != (1 << 16) + (int)sizeof(init_args_t) ||
        attr->args.uid_args.version != (1 << 16) + (int)sizeof(uid_args_t))
        return 7;
    memcpy(&token, id->internal, sizeof token);
    me = rank;
    npes = nranks;
    return 0;
}

int nvshmemx_hostlib_init_attr(unsigned flags, init_attr_t *attr) {
    (void)attr;
    const char *fail = getenv("MOCK_NVSHMEM_FAIL_INIT");
    if (flags != (1u << 3) || me < 0 || (fail && atoi(fail) == me)) return 7;
    const char *quit = getenv("MOCK_NVSHMEM_EXIT_INIT");
    if (quit && atoi(quit) == me) {
        fprintf(stderr, "mock-nvshmem: PE %d of %d exits in its init\n", me, npes);
        _exit(3);
    }
    const char *hang = getenv("MOCK_NVSHMEM_HANG_INIT");
    if (hang && atoi(hang) == me) {
        fprintf(stderr, "mock-nvshmem: PE %d of %d waits for its bootstrap forever\n", me, npes);
        for (;;) pause();
    }
    fprintf(stderr, "mock-nvshmem: PE %d of %d joined\n", me, npes);
    return 0;
}

int nvshmem_my_pe(void) { return me; }
int nvshmem_n_pes(void) { return npes; }

void *nvshmem_malloc(size_t size) {
    const char *fail = getenv("MOCK_NVSHMEM_FAIL_MALLOC");
    if (allocs >= 16 || (fail && atoi(fail) == me)) return NULL;
    char name[512];
    name_of(name, sizeof name, me, allocs);
    int fd = open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
    if (fd < 0 || ftruncate(fd, (off_t)size) != 0) return NULL;
    char *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED) return NULL;
    heap[allocs].base = p;
    heap[allocs].size = size;
    allocs++;
    return p;
}

/* PE `pe`'s copy of symmetric address `addr`, mapped here (waits up to 10 s for the peer's file). */
void *nvshmem_ptr(const void *addr, int pe) {
    for (int a = 0; a < allocs; a++) {
        char *base = heap[a].base;
        size_t size = heap[a].size;
        if ((const char *)addr < base || (const char *)addr >= base + size) continue;
        if (pe == me) return (void *)addr;
        char name[512];
        name_of(name, sizeof name, pe, a);
        for (int waited = 0; waited < 10000; waited++) {
            struct stat st;
            int fd = open(name, O_RDWR);
            if (fd >= 0 && fstat(fd, &st) == 0 && (size_t)st.st_size == size) {
                char *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
                close(fd);
                return p == MAP_FAILED ? NULL : p + ((const char *)addr - base);
            }
            if (fd >= 0) close(fd);
            usleep(1000);
        }
        return NULL;
    }
    return NULL;
}

void nvshmem_barrier_all(void) {
    char name[512];
    barrier_name(name, sizeof name, barriers, me);
    close(open(name, O_CREAT | O_WRONLY, 0600));
    for (int pe = 0; pe < npes; pe++) {
        barrier_name(name, sizeof name, barriers, pe);
        while (access(name, F_OK) != 0) usleep(1000);
    }
    barriers++;
    fprintf(stderr, "mock-nvshmem: PE %d passed barrier %d\n", me, barriers);
}

void nvshmem_free(void *p) {
    for (int a = 0; a < allocs; a++) {
        if (heap[a].base != p) continue;
        char name[512];
        name_of(name, sizeof name, me, a);
        munmap(p, heap[a].size);
        unlink(name);
    }
}

/* Registers a module that calls the device API: only after the init. */
int nvshmemx_cumodule_init(void *module) {
    if (me < 0 || !module) return 7;
    fprintf(stderr, "mock-nvshmem: PE %d registered its module\n", me);
    return 0;
}

void nvshmemx_hostlib_finalize(void) {
    /* Every PE passed barrier k - 1 once any PE passed barrier k: those markers are unused. */
    char name[512];
    for (int k = 0; k + 1 < barriers; k++) {
        barrier_name(name, sizeof name, k, me);
        unlink(name);
    }
    const char *hang = getenv("MOCK_NVSHMEM_HANG_FINALIZE");
    if (hang && atoi(hang) == me) {
        fprintf(stderr, "mock-nvshmem: PE %d waits in its finalize forever\n", me);
        for (;;) pause();
    }
    fprintf(stderr, "mock-nvshmem: PE %d finalized\n", me);
}
