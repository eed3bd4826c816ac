/* dlopen-probe: loads a library by SONAME the way CUDA programs do, and calls its version entry point. */
#include <dlfcn.h>
#include <stdio.h>

int main(int argc, char **argv) {
    if (argc < 2) { fprintf(stderr, "usage: dlopen-probe LIBRARY\n"); return 2; }
    void *h = dlopen(argv[1], RTLD_NOW);
    if (!h) { printf("dlopen %s failed: %s\n", argv[1], dlerror()); return 1; }
    int (*version)(int *) = (int (*)(int *))dlsym(h, "cuDriverGetVersion");
    int v = 0;
    if (version) version(&v);
    printf("dlopen %s ok cuDriverGetVersion=%d\n", argv[1], v);
    return 0;
}
