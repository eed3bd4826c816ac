/* Stub libnvidia-ml.so.1 for simulated hosts: the NVML calls gpuhook's tools use.
   The device count is what this process can see: /dev/nvidia<N> nodes. */
#include <dirent.h>
#include <stdio.h>
#include <string.h>

int nvmlInit_v2(void) { return 0; }
int nvmlInit(void) { return 0; }
int nvmlShutdown(void) { return 0; }
const char *nvmlErrorString(int r) { return r ? "Unknown Error" : "Success"; }

int nvmlSystemGetDriverVersion(char *version, unsigned int length) {
    snprintf(version, length, "%s", STUB_DRIVER_VERSION);
    return 0;
}

int nvmlDeviceGetCount_v2(unsigned int *count) {
    DIR *d = opendir("/dev");
    struct dirent *e;
    unsigned int n = 0;
    if (!d) { *count = 0; return 0; }
    while ((e = readdir(d)) != NULL)
        if (strncmp(e->d_name, "nvidia", 6) == 0 && e->d_name[6] >= '0' && e->d_name[6] <= '9') n++;
    closedir(d);
    *count = n;
    return 0;
}
int nvmlDeviceGetCount(unsigned int *count) { return nvmlDeviceGetCount_v2(count); }
