/* cuda-probe: what a CUDA program sees in a container, through the driver's own libcuda.so.1 (tests/gpu/run.sh).
 *
 *   cuda-probe              dlopen("libcuda.so.1"), cuInit(0), cuDeviceGetCount, each device's name and UUID
 *   cuda-probe --hold N     the same, then a context on device 0 held for N seconds (the GPU is in use meanwhile:
 *                           MPS clients connect, locked clocks show) after a line "cuda-probe: ready"
 *   cuda-probe --version    prints "cuda-probe 1" and exits (checks that the binary runs on this host's C library)
 *
 * One "cuda-probe: key=value" line per fact, flushed as written. Exit status: 0 ok; 1 libcuda.so.1 did not load;
 * 2 cuInit failed; 3 cuDeviceGetCount failed; 4 the context could not be made; 5 usage.
 *
 * Calls only what the driver API has had since CUDA 4 (cuCtxCreate_v2, cuDeviceGetUuid from 9.2, optional), each
 * looked up with dlsym, so it builds without CUDA's headers and runs on any driver; the simulator's stub libcuda has
 * only cuInit, cuDriverGetVersion and cuDeviceGetCount, and the rest is then reported as unavailable. Built against
 * an old glibc (tests/gpu/build.sh: zig cc -target x86_64-linux-gnu.2.17) it runs on any host's C library. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef int (*init_fn)(unsigned int);
typedef int (*int_fn)(int *);
typedef int (*get_fn)(int *, int);
typedef int (*name_fn)(char *, int, int);
typedef int (*uuid_fn)(unsigned char *, int);
typedef int (*ctx_fn)(void **, unsigned int, int);
typedef int (*destroy_fn)(void *);
typedef int (*errname_fn)(int, const char **);

static void *lib;

static const char *error_name(int r) {
    errname_fn name = (errname_fn)dlsym(lib, "cuGetErrorName");
    const char *s = NULL;
    if (name && name(r, &s) == 0 && s) return s;
    return "?";
}

/* Where the loaded libcuda lives (its first mapping) and whether that path is a mount point, and how (ro/rw). */
static void where_loaded(void) {
    char line[4096], path[4096] = "", opts[256] = "none";
    FILE *f = fopen("/proc/self/maps", "r");
    if (f) {
        while (fgets(line, sizeof line, f)) {
            char *p = strchr(line, '/');
            if (p && strstr(p, "libcuda.so")) {
                p[strcspn(p, "\n")] = 0;
                snprintf(path, sizeof path, "%s", p);
                break;
            }
        }
        fclose(f);
    }
    f = path[0] ? fopen("/proc/self/mountinfo", "r") : NULL;
    if (f) {
        while (fgets(line, sizeof line, f)) {
            char point[4096], options[256];
            if (sscanf(line, "%*s %*s %*s %*s %4095s %255s", point, options) == 2 && strcmp(point, path) == 0)
                snprintf(opts, sizeof opts, "%s", strncmp(options, "ro", 2) == 0 ? "ro" : "rw");
        }
        fclose(f);
    }
    printf("cuda-probe: libcuda=%s mount=%s\n", path[0] ? path : "?", opts);
}

int main(int argc, char **argv) {
    int hold = -1;
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc == 2 && strcmp(argv[1], "--version") == 0) { printf("cuda-probe 1\n"); return 0; }
    if (argc == 3 && strcmp(argv[1], "--hold") == 0) hold = atoi(argv[2]);
    else if (argc != 1) { fprintf(stderr, "usage: cuda-probe [--hold SECONDS | --version]\n"); return 5; }

    lib = dlopen("libcuda.so.1", RTLD_NOW);
    if (!lib) { printf("cuda-probe: dlopen=failed %s\n", dlerror()); return 1; }
    where_loaded();
    init_fn cu_init = (init_fn)dlsym(lib, "cuInit");
    int_fn version = (int_fn)dlsym(lib, "cuDriverGetVersion");
    int_fn count_of = (int_fn)dlsym(lib, "cuDeviceGetCount");
    if (!cu_init || !count_of) { printf("cuda-probe: cuInit=missing\n"); return 2; }
    int v = 0;
    if (version && version(&v) == 0) printf("cuda-probe: driver=%d\n", v);
    int r = cu_init(0);
    printf("cuda-probe: cuInit=%d %s\n", r, r ? error_name(r) : "CUDA_SUCCESS");
    if (r) return 2;
    int n = -1;
    r = count_of(&n);
    if (r) { printf("cuda-probe: count=failed %d %s\n", r, error_name(r)); return 3; }
    printf("cuda-probe: count=%d\n", n);

    get_fn get = (get_fn)dlsym(lib, "cuDeviceGet");
    name_fn name = (name_fn)dlsym(lib, "cuDeviceGetName");
    uuid_fn uuid = (uuid_fn)dlsym(lib, "cuDeviceGetUuid_v2");
    if (!uuid) uuid = (uuid_fn)dlsym(lib, "cuDeviceGetUuid");
    int first = 0;
    for (int i = 0; i < n && i < 64; i++) {
        int dev = i;
        if (get && get(&dev, i) != 0) dev = i;
        if (i == 0) first = dev;
        char shown[256] = "unavailable";
        if (name && name(shown, sizeof shown, dev) != 0) snprintf(shown, sizeof shown, "failed");
        unsigned char u[16];
        char us[64] = "unavailable";
        if (uuid && uuid(u, dev) == 0)
            snprintf(us, sizeof us, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0], u[1],
                     u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14], u[15]);
        printf("cuda-probe: device%d uuid=%s name=%s\n", i, us, shown);
    }
    if (hold < 0) return 0;

    ctx_fn create = (ctx_fn)dlsym(lib, "cuCtxCreate_v2");
    destroy_fn destroy = (destroy_fn)dlsym(lib, "cuCtxDestroy_v2");
    void *ctx = NULL;
    if (!create || n < 1) {
        printf("cuda-probe: context=unavailable\n");
    } else if ((r = create(&ctx, 0, first)) != 0) {
        printf("cuda-probe: context=failed %d %s\n", r, error_name(r));
        return 4;
    } else {
        printf("cuda-probe: context=ok\n");
    }
    printf("cuda-probe: ready\n");
    sleep((unsigned)hold);
    if (ctx && destroy) destroy(ctx);
    return 0;
}
