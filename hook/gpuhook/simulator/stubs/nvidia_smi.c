/* Stub nvidia-smi for simulated hosts: loads libnvidia-ml.so.1 the way the real tool does, and lists the MIG
   devices this process may use: the compute instances in /proc/driver/nvidia/capabilities whose GI and CI
   nodes are in /dev/nvidia-caps (what the driver checks). */
#include <dlfcn.h>
#include <glob.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

static int has_node(const char *access) {
    FILE *f = fopen(access, "r");
    char line[128], path[64];
    int minor = -1;
    if (!f) return 0;
    while (fgets(line, sizeof line, f)) sscanf(line, "DeviceFileMinor: %d", &minor);
    fclose(f);
    struct stat st;
    snprintf(path, sizeof path, "/dev/nvidia-caps/nvidia-cap%d", minor);
    return minor >= 0 && stat(path, &st) == 0 && S_ISCHR(st.st_mode);
}

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
    glob_t g;
    if (glob("/proc/driver/nvidia/capabilities/gpu*/mig/gi*/ci*/access", 0, NULL, &g) == 0) {
        for (size_t i = 0; i < g.gl_pathc; i++) {
            char gi[512];
            snprintf(gi, sizeof gi, "%s", g.gl_pathv[i]);
            char *cut = strstr(gi, "/ci");
            if (!cut) continue;
            strcpy(cut, "/access");
            if (has_node(g.gl_pathv[i]) && has_node(gi)) {
                char shown[512];
                snprintf(shown, sizeof shown, "%s", g.gl_pathv[i] + strlen("/proc/driver/nvidia/capabilities/"));
                shown[strlen(shown) - strlen("/access")] = 0;
                printf("MIG device: %s\n", shown);
            }
        }
        globfree(&g);
    }
    return 0;
}
