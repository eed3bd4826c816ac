/* Stub nvidia-smi for simulated hosts: loads libnvidia-ml.so.1 the way the real tool does. */
#include <dlfcn.h>
#include <stdio.h>

int main(void) {
    void *h = dlopen("libnvidia-ml.so.1", RTLD_NOW);
    if (!h) { fprintf(stderr, "NVIDIA-SMI has failed: %s\n", dlerror()); return 9; }
    int (*init)(void) = (int (*)(void))dlsym(h, "nvmlInit_v2");
    int (*ver)(char *, unsigned int) = (int (*)(char *, unsigned int))dlsym(h, "nvmlSystemGetDriverVersion");
    int (*count)(unsigned int *) = (int (*)(unsigned int *))dlsym(h, "nvmlDeviceGetCount_v2");
    char v[96] = "";
    unsigned int n = 0;
    if (!init || !ver || !count || init() != 0) { fprintf(stderr, "NVIDIA-SMI has failed\n"); return 9; }
    ver(v, sizeof v);
    count(&n);
    printf("NVIDIA-SMI (gpuhook simulated) Driver Version: %s GPUs: %u\n", v, n);
    return 0;
}
