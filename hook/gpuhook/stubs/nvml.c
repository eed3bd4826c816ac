/* Stub libnvidia-ml.so.1 for simulated hosts: the NVML calls gpuhook and its tools make.
   The device count is what this process can see: /dev/nvidia<N> nodes. Devices are found by the
   simulator's UUIDs (GPU-<index as 8 hex digits>-...); every device reports the compiled-in
   compute capability (STUB_CC_MAJOR.STUB_CC_MINOR) and brand (STUB_BRAND, an nvmlBrandType_t). */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct { int index; } device_t;
static device_t devices[256];

int nvmlInit_v2(void) { return 0; }
int nvmlInit(void) { return 0; }
int nvmlInitWithFlags(unsigned int flags) { (void)flags; return 0; }
int nvmlShutdown(void) { return 0; }
const char *nvmlErrorString(int r) { return r == 0 ? "Success" : r == 6 ? "Not Found" : "Unknown Error"; }

int nvmlSystemGetDriverVersion(char *version, unsigned int length) {
    snprintf(version, length, "%s", STUB_DRIVER_VERSION);
    return 0;
}
int nvmlSystemGetCudaDriverVersion(int *version) { *version = STUB_CUDA_VERSION; return 0; }
int nvmlSystemGetCudaDriverVersion_v2(int *version) { *version = STUB_CUDA_VERSION; return 0; }

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

int nvmlDeviceGetHandleByUUID(const char *uuid, device_t **device) {
    if (strncmp(uuid, "GPU-", 4) != 0 || strlen(uuid) < 12) return 6; /* NVML_ERROR_NOT_FOUND */
    char digits[9];
    memcpy(digits, uuid + 4, 8);
    digits[8] = 0;
    long index = strtol(digits, NULL, 16);
    if (index < 0 || index >= 256) return 6;
    devices[index].index = (int)index;
    *device = &devices[index];
    return 0;
}
int nvmlDeviceGetCudaComputeCapability(device_t *device, int *major, int *minor) {
    (void)device; *major = STUB_CC_MAJOR; *minor = STUB_CC_MINOR; return 0;
}
int nvmlDeviceGetBrand(device_t *device, int *brand) { (void)device; *brand = STUB_BRAND; return 0; }
