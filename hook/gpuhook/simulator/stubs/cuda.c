/* Stub libcuda.so.1 for simulated hosts: the driver API entry points gpuhook and its tests call. */
#include <dirent.h>
#include <string.h>

int cuInit(unsigned int flags) { (void)flags; return 0; }
int cuDriverGetVersion(int *version) { *version = STUB_CUDA_VERSION; return 0; }
int cuDeviceGetCount(int *count) {
    DIR *d = opendir("/dev");
    struct dirent *e;
    int n = 0;
    if (!d) { *count = 0; return 0; }
    while ((e = readdir(d)) != NULL)
        if (strncmp(e->d_name, "nvidia", 6) == 0 && e->d_name[6] >= '0' && e->d_name[6] <= '9') n++;
    closedir(d);
    *count = n;
    return 0;
}
