/* Stub libnvidia-ml.so.1 for simulated hosts: the NVML calls gpuhook and its tools make.
   The device count is what this process can see: /dev/nvidia<N> nodes. Devices are found by the
   simulator's UUIDs (GPU-<index as 8 hex digits>-...); every device reports the compiled-in
   compute capability (STUB_CC_MAJOR.STUB_CC_MINOR), brand (STUB_BRAND, an nvmlBrandType_t) and memory.
   MIG: STUB_STATE.mig lists the MIG devices ("<gpu> <mig> <gi> <ci> <gi slices> <ci slices> <MiB> <MIG-uuid>"
   lines, gpuhook.vendors.nvidia.sim_mig writes them); a GPU with a line there is in MIG mode, and without that file
   no GPU is MIG capable (nvmlDeviceGetMigMode answers NOT_SUPPORTED). */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct { int index; int mig; } device_t; /* mig: -1 for a whole GPU */
static device_t devices[256];
typedef struct { int gpu, mig, gi, ci, gis, cis; unsigned long long mib; char uuid[96]; } mig_t;
static mig_t migs[512];
static device_t mig_handles[512];
static int mig_count = -1, mig_capable = 0;

static void load_migs(void) {
    if (mig_count >= 0) return;
    mig_count = 0;
    FILE *f = fopen(STUB_STATE ".mig", "r");
    if (!f) return;
    mig_capable = 1;
    mig_t m;
    while (mig_count < 512 && fscanf(f, "%d %d %d %d %d %d %llu %95s", &m.gpu, &m.mig, &m.gi, &m.ci, &m.gis,
                                     &m.cis, &m.mib, m.uuid) == 8) {
        migs[mig_count] = m;
        mig_handles[mig_count].index = m.gpu;
        mig_handles[mig_count].mig = mig_count;
        mig_count++;
    }
    fclose(f);
}

/* Tunables kept in a state file (STUB_STATE), so that separate processes see one GPU; every change is
   appended to STUB_STATE.log, and a line "<index> <call>" in STUB_STATE.fail makes that call fail. */
static unsigned clk_lo[256], clk_hi[256], power_mw[256], compute_mode[256];

static void load_state(void) {
    for (int i = 0; i < 256; i++) { clk_lo[i] = clk_hi[i] = 0; power_mw[i] = 700000; compute_mode[i] = 0; }
    FILE *f = fopen(STUB_STATE, "r");
    if (!f) return;
    int i; unsigned a, b, c, d;
    while (fscanf(f, "%d %u %u %u %u", &i, &a, &b, &c, &d) == 5)
        if (i >= 0 && i < 256) { clk_lo[i] = a; clk_hi[i] = b; power_mw[i] = c; compute_mode[i] = d; }
    fclose(f);
}

static void save_state(void) {
    FILE *f = fopen(STUB_STATE ".tmp", "w");
    if (!f) return;
    for (int i = 0; i < STUB_NV_GPUS; i++)
        fprintf(f, "%d %u %u %u %u\n", i, clk_lo[i], clk_hi[i], power_mw[i], compute_mode[i]);
    fclose(f);
    rename(STUB_STATE ".tmp", STUB_STATE);
}

#include "stub_state.h"

static void count_init(void) { /* STUB_STATE.inits: one line per session, so tests can count them */
    FILE *f = fopen(STUB_STATE ".inits", "a");
    if (f) { fputs("init\n", f); fclose(f); }
}
int nvmlInit_v2(void) { count_init(); return 0; }
int nvmlInit(void) { count_init(); return 0; }
int nvmlInitWithFlags(unsigned int flags) { (void)flags; count_init(); return 0; }
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
    load_migs();
    for (int i = 0; i < mig_count; i++)
        if (strcmp(uuid, migs[i].uuid) == 0) { *device = &mig_handles[i]; return 0; }
    if (strncmp(uuid, "GPU-", 4) != 0 || strlen(uuid) < 12) return 6; /* NVML_ERROR_NOT_FOUND */
    char digits[9];
    memcpy(digits, uuid + 4, 8);
    digits[8] = 0;
    long index = strtol(digits, NULL, 16);
    if (index < 0 || index >= 256) return 6;
    devices[index].index = (int)index;
    devices[index].mig = -1;
    *device = &devices[index];
    return 0;
}
int nvmlDeviceGetUUID(device_t *d, char *uuid, unsigned int length) {
    load_migs();
    if (d->mig >= 0) snprintf(uuid, length, "%s", migs[d->mig].uuid);
    else snprintf(uuid, length, "GPU-%08x-5a1e-4000-8000-%012x", d->index, 0xD00D0000u + (unsigned)d->index);
    return 0;
}
/* What NVIDIA's own tools (nvidia-ctk, go-nvml) ask besides: handles by index, minor numbers, PCI ids, names, as
   the simulator lays the GPUs out (sim.py: GPU i at 0000:<0x10 + i>:00.0, /dev/nvidia<i>). */
int nvmlDeviceGetHandleByIndex_v2(unsigned int index, device_t **device) {
    unsigned int count;
    nvmlDeviceGetCount_v2(&count);
    if (index >= count || index >= 256) return 2; /* NVML_ERROR_INVALID_ARGUMENT */
    devices[index].index = (int)index;
    devices[index].mig = -1;
    *device = &devices[index];
    return 0;
}
int nvmlDeviceGetHandleByIndex(unsigned int index, device_t **device) {
    return nvmlDeviceGetHandleByIndex_v2(index, device);
}
int nvmlDeviceGetMinorNumber(device_t *d, unsigned int *minor) {
    if (d->mig >= 0) return 3; /* NVML_ERROR_NOT_SUPPORTED, as for a MIG device */
    *minor = (unsigned int)d->index;
    return 0;
}
typedef struct {
    char busIdLegacy[16];
    unsigned int domain, bus, device, pciDeviceId, pciSubSystemId;
    char busId[32];
} pci_t;
static int pci_info(device_t *d, pci_t *p) {
    if (d->mig >= 0) return 3;
    memset(p, 0, sizeof *p);
    p->bus = 0x10 + (unsigned)d->index;
    p->pciDeviceId = 0x233010de; /* H100 SXM5 80GB, NVIDIA's vendor id in the low half */
    snprintf(p->busId, sizeof p->busId, "00000000:%02X:00.0", p->bus);
    snprintf(p->busIdLegacy, sizeof p->busIdLegacy, "0000:%02X:00.0", p->bus);
    return 0;
}
int nvmlDeviceGetPciInfo_v3(device_t *d, pci_t *p) { return pci_info(d, p); }
int nvmlDeviceGetPciInfo_v2(device_t *d, pci_t *p) { return pci_info(d, p); }
int nvmlDeviceGetPciInfo(device_t *d, pci_t *p) { return pci_info(d, p); }
int nvmlDeviceGetName(device_t *d, char *name, unsigned int length) {
    (void)d;
    snprintf(name, length, "%s", "NVIDIA H100 80GB HBM3");
    return 0;
}
int nvmlSystemGetNVMLVersion(char *version, unsigned int length) {
    snprintf(version, length, "12.%s", STUB_DRIVER_VERSION);
    return 0;
}

/* MIG mode as set (STUB_STATE.migmode: "<gpu> <mode>" lines), else on where the table has the GPU's devices. */
static int mig_mode(int gpu) {
    int mode = 0, g, m;
    for (int i = 0; i < mig_count; i++) if (migs[i].gpu == gpu) mode = 1;
    FILE *f = fopen(STUB_STATE ".migmode", "r");
    if (!f) return mode;
    while (fscanf(f, "%d %d", &g, &m) == 2) if (g == gpu) mode = m;
    fclose(f);
    return mode;
}
int nvmlDeviceGetMigMode(device_t *d, unsigned *current, unsigned *pending) {
    load_migs();
    if (!mig_capable) return 3; /* NVML_ERROR_NOT_SUPPORTED */
    *current = *pending = (unsigned)mig_mode(d->index);
    return 0;
}
int nvmlDeviceIsMigDeviceHandle(device_t *d, unsigned *is_mig) { *is_mig = d->mig >= 0; return 0; }
int nvmlDeviceGetMaxMigDeviceCount(device_t *d, unsigned *count) { (void)d; *count = 7; return 0; }
int nvmlDeviceGetMigDeviceHandleByIndex(device_t *d, unsigned index, device_t **mig) {
    load_migs();
    for (int i = 0; i < mig_count; i++)
        if (migs[i].gpu == d->index && migs[i].mig == (int)index) { *mig = &mig_handles[i]; return 0; }
    return 6; /* NVML_ERROR_NOT_FOUND */
}
int nvmlDeviceGetDeviceHandleFromMigDeviceHandle(device_t *mig, device_t **device) {
    if (mig->mig < 0) return 2; /* NVML_ERROR_INVALID_ARGUMENT */
    devices[mig->index].index = mig->index;
    devices[mig->index].mig = -1;
    *device = &devices[mig->index];
    return 0;
}
int nvmlDeviceGetGpuInstanceId(device_t *d, unsigned *id) {
    if (d->mig < 0) return 2;
    *id = (unsigned)migs[d->mig].gi; return 0;
}
int nvmlDeviceGetComputeInstanceId(device_t *d, unsigned *id) {
    if (d->mig < 0) return 2;
    *id = (unsigned)migs[d->mig].ci; return 0;
}
typedef struct { unsigned sm, ce, dec, enc, jpg, ofa, gis, cis; unsigned long long mib; } attributes_t;
int nvmlDeviceGetAttributes_v2(device_t *d, attributes_t *a) {
    if (d->mig < 0) return 3; /* NVML_ERROR_NOT_SUPPORTED */
    memset(a, 0, sizeof *a);
    mig_t *m = &migs[d->mig];
    a->gis = (unsigned)m->gis; a->cis = (unsigned)m->cis; a->mib = m->mib; a->sm = 16u * (unsigned)m->cis;
    /* an H100's engines by GPU instance size: a copy engine, decoder and JPEG engine a slice (8 copy engines and
       the optical-flow engine with all 7); no encoders */
    a->ce = m->gis == 7 ? 8u : (unsigned)m->gis; a->dec = a->jpg = (unsigned)m->gis; a->ofa = m->gis == 7;
    return 0;
}
int nvmlDeviceGetCudaComputeCapability(device_t *device, int *major, int *minor) {
    (void)device; *major = STUB_CC_MAJOR; *minor = STUB_CC_MINOR; return 0;
}
int nvmlDeviceGetBrand(device_t *device, int *brand) { (void)device; *brand = STUB_BRAND; return 0; }
/* Telemetry (stub_state.h): a GPU without a line reports an idle H100 80GB HBM3 (its frame buffer as NVML counts
   it: 81559 MiB); the clock is the SM clock. Locked clocks show as the SM clock, as on a real GPU. */
static telemetry_t telemetry(int index) {
    return read_telemetry(index, (telemetry_t){0, 567017472ULL, 85520809984ULL, 72000, 33, 1980});
}
typedef struct { unsigned long long total, free, used; } memory_t; /* nvmlMemory_t, the v1 call */
int nvmlDeviceGetMemoryInfo(device_t *d, memory_t *memory) {
    telemetry_t t = telemetry(d->index);
    memory->total = t.total; memory->used = t.used; memory->free = t.total - t.used;
    return 0;
}
typedef struct { unsigned gpu, memory; } utilization_t;
int nvmlDeviceGetUtilizationRates(device_t *d, utilization_t *u) {
    telemetry_t t = telemetry(d->index);
    u->gpu = t.util; u->memory = t.util / 2;
    return 0;
}
int nvmlDeviceGetPowerUsage(device_t *d, unsigned *mw) { *mw = telemetry(d->index).power; return 0; }
int nvmlDeviceGetTemperature(device_t *d, int sensor, unsigned *c) {
    if (sensor != 0) return 3; /* NVML_ERROR_NOT_SUPPORTED: only NVML_TEMPERATURE_GPU */
    *c = telemetry(d->index).temp;
    return 0;
}
int nvmlDeviceGetClockInfo(device_t *d, int type, unsigned *mhz) {
    if (type != 1) return 3; /* only NVML_CLOCK_SM */
    load_state();
    *mhz = clk_hi[d->index] ? clk_hi[d->index] : telemetry(d->index).clock;
    return 0;
}

/* an H100 SXM's clocks: memory 2619 MHz; graphics 345-1980 MHz in 15 MHz steps, listed highest first as NVML does */
#define MEM_MHZ 2619u
#define GFX_MIN 345u
#define GFX_MAX 1980u
#define GFX_STEP 15u
static int clock_list(unsigned *count, unsigned *out, unsigned first, unsigned n, unsigned step) {
    if (!out || *count < n) { *count = n; return 7; } /* NVML_ERROR_INSUFFICIENT_SIZE */
    for (unsigned i = 0; i < n; i++) out[i] = first - i * step;
    *count = n;
    return 0;
}
int nvmlDeviceGetSupportedMemoryClocks(device_t *d, unsigned *count, unsigned *mhz) {
    (void)d; return clock_list(count, mhz, MEM_MHZ, 1, 0);
}
int nvmlDeviceGetSupportedGraphicsClocks(device_t *d, unsigned mem, unsigned *count, unsigned *mhz) {
    (void)d;
    if (mem != MEM_MHZ) return 2; /* NVML_ERROR_INVALID_ARGUMENT */
    return clock_list(count, mhz, GFX_MAX, (GFX_MAX - GFX_MIN) / GFX_STEP + 1, GFX_STEP);
}
int nvmlDeviceGetMaxClockInfo(device_t *d, int type, unsigned *mhz) {
    (void)d;
    if (type != 0 && type != 1) return 3; /* graphics and SM */
    *mhz = GFX_MAX;
    return 0;
}

int nvmlDeviceSetGpuLockedClocks(device_t *d, unsigned lo, unsigned hi) {
    if (must_fail(d->index, "clocks")) return 999; /* NVML_ERROR_UNKNOWN */
    load_state(); clk_lo[d->index] = lo; clk_hi[d->index] = hi; save_state();
    log_call("set-clocks", d->index, lo, hi);
    return 0;
}
int nvmlDeviceResetGpuLockedClocks(device_t *d) {
    load_state(); clk_lo[d->index] = clk_hi[d->index] = 0; save_state();
    log_call("reset-clocks", d->index, 0, 0);
    return 0;
}
int nvmlDeviceGetPowerManagementLimit(device_t *d, unsigned *mw) { load_state(); *mw = power_mw[d->index]; return 0; }
int nvmlDeviceGetPowerManagementLimitConstraints(device_t *d, unsigned *lo, unsigned *hi) {
    (void)d; *lo = 100000; *hi = 700000; return 0; /* an H100's board: 100-700 W */
}
int nvmlDeviceSetPowerManagementLimit(device_t *d, unsigned mw) {
    if (must_fail(d->index, "power")) return 999;
    load_state(); power_mw[d->index] = mw; save_state();
    log_call("set-power", d->index, mw, 0);
    return 0;
}
/* Fans (STUB_FANS per GPU): "<index> <fan> <policy> <target %>" lines in STUB_STATE.fans; a fan without one
   follows the driver's curve (policy 0) at 35%. A board without fans answers NVML_ERROR_NOT_SUPPORTED (3). */
static unsigned fan_policy[256][4], fan_target[256][4];
static void load_fans(void) {
    for (int i = 0; i < 256; i++) for (int j = 0; j < 4; j++) { fan_policy[i][j] = 0; fan_target[i][j] = 35; }
    FILE *f = fopen(STUB_STATE ".fans", "r");
    if (!f) return;
    int i, j; unsigned p, t;
    while (fscanf(f, "%d %d %u %u", &i, &j, &p, &t) == 4)
        if (i >= 0 && i < 256 && j >= 0 && j < 4) { fan_policy[i][j] = p; fan_target[i][j] = t; }
    fclose(f);
}
static void save_fans(void) {
    FILE *f = fopen(STUB_STATE ".fans.tmp", "w");
    if (!f) return;
    for (int i = 0; i < STUB_NV_GPUS; i++) for (int j = 0; j < STUB_FANS; j++)
        fprintf(f, "%d %d %u %u\n", i, j, fan_policy[i][j], fan_target[i][j]);
    fclose(f);
    rename(STUB_STATE ".fans.tmp", STUB_STATE ".fans");
}
int nvmlDeviceGetNumFans(device_t *d, unsigned *count) { (void)d; *count = STUB_FANS; return 0; }
int nvmlDeviceGetMinMaxFanSpeed(device_t *d, unsigned *lo, unsigned *hi) {
    (void)d; if (!STUB_FANS) return 3; *lo = 30; *hi = 100; return 0;
}
int nvmlDeviceGetFanControlPolicy_v2(device_t *d, unsigned fan, unsigned *policy) {
    if (fan >= STUB_FANS) return 2; /* NVML_ERROR_INVALID_ARGUMENT */
    load_fans(); *policy = fan_policy[d->index][fan]; return 0;
}
int nvmlDeviceGetTargetFanSpeed(device_t *d, unsigned fan, unsigned *speed) {
    if (fan >= STUB_FANS) return 2;
    load_fans(); *speed = fan_target[d->index][fan]; return 0;
}
int nvmlDeviceGetFanSpeed_v2(device_t *d, unsigned fan, unsigned *speed) {
    return nvmlDeviceGetTargetFanSpeed(d, fan, speed);
}
int nvmlDeviceGetFanSpeed(device_t *d, unsigned *speed) {
    if (!STUB_FANS) return 3;
    return nvmlDeviceGetTargetFanSpeed(d, 0, speed);
}
int nvmlDeviceSetFanSpeed_v2(device_t *d, unsigned fan, unsigned speed) {
    if (fan >= STUB_FANS || speed < 30 || speed > 100) return 2;
    if (must_fail(d->index, "fan")) return 999;
    load_fans(); fan_policy[d->index][fan] = 1; fan_target[d->index][fan] = speed; save_fans();
    log_call("set-fan", d->index, fan, speed);
    return 0;
}
int nvmlDeviceSetDefaultFanSpeed_v2(device_t *d, unsigned fan) {
    if (fan >= STUB_FANS) return 2;
    load_fans(); fan_policy[d->index][fan] = 0; fan_target[d->index][fan] = 35; save_fans();
    log_call("auto-fan", d->index, fan, 0);
    return 0;
}
int nvmlDeviceGetComputeMode(device_t *d, int *mode) { load_state(); *mode = (int)compute_mode[d->index]; return 0; }
int nvmlDeviceSetComputeMode(device_t *d, int mode) {
    if (must_fail(d->index, "compute")) return 999;
    load_state(); compute_mode[d->index] = (unsigned)mode; save_state();
    log_call("set-compute", d->index, (unsigned)mode, 0);
    return 0;
}

/* MIG management (gpuhook partition apply), an H100 80GB's profiles: GPU instance profile -> slices and MiB; each GPU
   instance gets one compute instance of its size. A change rewrites STUB_STATE.mig (and .migmode) and runs
   STUB_REACT mig-sync, the simulator playing the driver's procfs for the new instances. */
static const struct { unsigned id, slices; unsigned long long mib; } PROFILES[] = {
    {0, 1, 9984}, {1, 2, 20224}, {2, 3, 40704}, {3, 4, 40704}, {4, 7, 81664}, {9, 1, 20224}};
#define NPROFILES (sizeof PROFILES / sizeof PROFILES[0])
typedef struct { int gpu, gi; unsigned slices; } gi_t;
typedef struct { int gpu, gi, ci; } ci_t;
static gi_t gi_handles[1024];
static ci_t ci_handles[1024];
static int gi_next = 0, ci_next = 0;
typedef struct { unsigned id, p2p, slices, count, sm, ce, dec, enc, jpg, ofa; unsigned long long mib; } gi_info_t;
typedef struct { unsigned id, slices, count, sm, ce, dec, enc, jpg, ofa; } ci_info_t;

static void save_migs(void) {
    for (int i = 0; i < mig_count; i++) { mig_handles[i].index = migs[i].gpu; mig_handles[i].mig = i; }
    FILE *f = fopen(STUB_STATE ".mig.tmp", "w");
    if (!f) return;
    for (int i = 0; i < mig_count; i++)
        fprintf(f, "%d %d %d %d %d %d %llu %s\n", migs[i].gpu, migs[i].mig, migs[i].gi, migs[i].ci, migs[i].gis,
                migs[i].cis, migs[i].mib, migs[i].uuid);
    fclose(f);
    rename(STUB_STATE ".mig.tmp", STUB_STATE ".mig");
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "%s mig-sync 0 -", STUB_REACT);
    if (system(cmd) != 0) fprintf(stderr, "stub nvml: %s failed\n", cmd);
}
static int used_slices(int gpu) {
    int n = 0;
    for (int i = 0; i < mig_count; i++) if (migs[i].gpu == gpu && migs[i].ci == 0) n += migs[i].gis;
    return n;
}
int nvmlDeviceSetMigMode(device_t *d, unsigned mode, int *status) {
    load_migs();
    if (!mig_capable) return 3;
    if (mode && !mig_mode(d->index)) { /* off -> on */ } else if (!mode) {
        for (int i = 0; i < mig_count; i++) if (migs[i].gpu == d->index) return 19; /* NVML_ERROR_IN_USE */
    }
    FILE *f = fopen(STUB_STATE ".migmode", "a");
    if (f) { fprintf(f, "%d %u\n", d->index, mode ? 1u : 0u); fclose(f); }
    log_call("set-mig-mode", d->index, mode, 0);
    *status = 0;
    return 0;
}
int nvmlDeviceGetGpuInstanceProfileInfo(device_t *d, unsigned profile, gi_info_t *info) {
    (void)d;
    for (unsigned i = 0; i < NPROFILES; i++)
        if (PROFILES[i].id == profile) {
            memset(info, 0, sizeof *info);
            info->id = profile; info->slices = PROFILES[i].slices; info->count = 7 / PROFILES[i].slices;
            info->sm = 16 * PROFILES[i].slices; info->mib = PROFILES[i].mib;
            return 0;
        }
    return 3; /* NVML_ERROR_NOT_SUPPORTED */
}
int nvmlDeviceCreateGpuInstance(device_t *d, unsigned profile, gi_t **gi) {
    load_migs();
    if (!mig_mode(d->index)) return 3;
    unsigned slices = 0;
    unsigned long long mib = 0;
    for (unsigned i = 0; i < NPROFILES; i++) if (PROFILES[i].id == profile) { slices = PROFILES[i].slices; mib = PROFILES[i].mib; }
    if (!slices) return 2;
    if (used_slices(d->index) + (int)slices > 7 || gi_next >= 64) return 4; /* NVML_ERROR_INSUFFICIENT_RESOURCES? */
    int id = 1;
    for (int taken = 1; taken;) {
        taken = 0;
        for (int i = 0; i < mig_count; i++) if (migs[i].gpu == d->index && migs[i].gi == id) { taken = 1; id++; break; }
    }
    /* a GPU instance without its compute instance yet: a table line with ci -1 (no MIG device until it has one) */
    mig_t m = {d->index, -1, id, -1, (int)slices, 0, mib, "-"};
    migs[mig_count++] = m;
    gi_handles[gi_next] = (gi_t){d->index, id, slices};
    *gi = &gi_handles[gi_next++];
    log_call("create-gi", d->index, (unsigned long long)id, slices);
    return 0;
}
static int renumber(int gpu) { /* MIG device indices: GI then CI order, devices with a CI only */
    int next = 0;
    for (int gi = 0; gi < 16; gi++)
        for (int i = 0; i < mig_count; i++)
            if (migs[i].gpu == gpu && migs[i].gi == gi && migs[i].ci >= 0) {
                migs[i].mig = next;
                snprintf(migs[i].uuid, sizeof migs[i].uuid, "MIG-%08x-%04x-4000-8000-%012llx", gpu, next,
                         0xC0FFEE000000ULL + (unsigned long long)gpu * 16 + (unsigned long long)next);
                next++;
            }
    return next;
}
int nvmlGpuInstanceGetComputeInstanceProfileInfo(gi_t *gi, unsigned profile, unsigned eng, ci_info_t *info) {
    (void)eng;
    for (unsigned i = 0; i < NPROFILES; i++)
        if (PROFILES[i].id == profile && PROFILES[i].slices <= gi->slices && profile != 9) {
            memset(info, 0, sizeof *info);
            info->id = profile; info->slices = PROFILES[i].slices; info->count = gi->slices / PROFILES[i].slices;
            info->sm = 16 * PROFILES[i].slices;
            return 0;
        }
    return 3;
}
int nvmlGpuInstanceCreateComputeInstance(gi_t *gi, unsigned profile, ci_t **ci) {
    load_migs();
    unsigned slices = 0;
    for (unsigned i = 0; i < NPROFILES; i++) if (PROFILES[i].id == profile) slices = PROFILES[i].slices;
    for (int i = 0; i < mig_count; i++)
        if (migs[i].gpu == gi->gpu && migs[i].gi == gi->gi && migs[i].ci < 0 && slices && ci_next < 1024) {
            migs[i].ci = 0; migs[i].cis = (int)slices;
            renumber(gi->gpu);
            ci_handles[ci_next] = (ci_t){gi->gpu, gi->gi, 0};
            *ci = &ci_handles[ci_next++];
            save_migs();
            log_call("create-ci", gi->gpu, (unsigned long long)gi->gi, 0);
            return 0;
        }
    return 2;
}
int nvmlDeviceGetGpuInstances(device_t *d, unsigned profile, gi_t **out, unsigned *count) {
    load_migs();
    unsigned slices = 0, n = 0;
    for (unsigned i = 0; i < NPROFILES; i++) if (PROFILES[i].id == profile) slices = PROFILES[i].slices;
    for (int i = 0; i < mig_count && gi_next < 1024; i++)
        if (migs[i].gpu == d->index && migs[i].gis == (int)slices && slices &&
            (profile != 9 || migs[i].mib == 20224) && (profile != 0 || migs[i].mib != 20224)) {
            gi_handles[gi_next] = (gi_t){d->index, migs[i].gi, slices};
            out[n++] = &gi_handles[gi_next++];
        }
    *count = n;
    return 0;
}
int nvmlGpuInstanceGetComputeInstances(gi_t *gi, unsigned profile, ci_t **out, unsigned *count) {
    load_migs();
    unsigned n = 0;
    for (int i = 0; i < mig_count && ci_next < 1024; i++)
        if (migs[i].gpu == gi->gpu && migs[i].gi == gi->gi && migs[i].ci >= 0 && profile <= 4 &&
            (unsigned)migs[i].cis == (profile == 4 ? 7u : profile + 1u)) {
            ci_handles[ci_next] = (ci_t){gi->gpu, gi->gi, migs[i].ci};
            out[n++] = &ci_handles[ci_next++];
        }
    *count = n;
    return 0;
}
int nvmlComputeInstanceDestroy(ci_t *ci) {
    load_migs();
    for (int i = 0; i < mig_count; i++)
        if (migs[i].gpu == ci->gpu && migs[i].gi == ci->gi && migs[i].ci == ci->ci) {
            migs[i].ci = -1; migs[i].cis = 0; migs[i].mig = -1;
            renumber(ci->gpu);
            save_migs();
            log_call("destroy-ci", ci->gpu, (unsigned long long)ci->gi, 0);
            return 0;
        }
    return 6;
}
int nvmlGpuInstanceDestroy(gi_t *gi) {
    load_migs();
    for (int i = 0; i < mig_count; i++)
        if (migs[i].gpu == gi->gpu && migs[i].gi == gi->gi) {
            if (migs[i].ci >= 0) return 19; /* NVML_ERROR_IN_USE: its compute instance first */
            migs[i] = migs[--mig_count];
            save_migs();
            log_call("destroy-gi", gi->gpu, (unsigned long long)gi->gi, 0);
            return 0;
        }
    return 6;
}

/* Placements (KEP-4815's partitions made on demand): an H100's, in memory slices (8), by GPU instance profile. A
   GPU instance made at a placement is remembered in STUB_STATE.migplace ("<gpu> <gi> <start> <size>"), and one
   that would overlap another so made is refused, as the driver refuses it. */
typedef struct { unsigned start, size; } placement_t;
typedef struct { device_t *device; unsigned id, profile; placement_t placement; } gi_instance_info_t;
static unsigned placements_of(unsigned profile, placement_t *out) {
    unsigned size = profile == 0 ? 1 : profile == 1 || profile == 9 ? 2 : profile == 2 || profile == 3 ? 4 : 8;
    unsigned last = profile == 0 ? 6 : profile == 1 ? 4 : profile == 9 ? 6 : profile == 2 ? 4 : 0, n = 0;
    if (profile > 4 && profile != 9) return 0;
    for (unsigned s = 0; s <= last; s += size) { out[n].start = s; out[n].size = size; n++; }
    return n;
}
int nvmlDeviceGetGpuInstancePossiblePlacements_v2(device_t *d, unsigned profile, placement_t *out, unsigned *count) {
    (void)d;
    placement_t all[8];
    unsigned n = placements_of(profile, all);
    if (!n) return 3;
    if (!out) { *count = n; return 0; }
    if (*count < n) { *count = n; return 7; }
    memcpy(out, all, n * sizeof *all);
    *count = n;
    return 0;
}
static int placed(int gpu, int gi, placement_t *p) { /* the placement a GPU instance was made at; 0 if none known */
    FILE *f = fopen(STUB_STATE ".migplace", "r");
    int g, i, found = 0;
    unsigned s, z;
    while (f && fscanf(f, "%d %d %u %u", &g, &i, &s, &z) == 4)
        if (g == gpu && i == gi) { p->start = s; p->size = z; found = 1; }
    if (f) fclose(f);
    return found;
}
int nvmlDeviceCreateGpuInstanceWithPlacement(device_t *d, unsigned profile, const placement_t *at, gi_t **gi) {
    load_migs();
    placement_t all[8], other;
    unsigned n = placements_of(profile, all), ok = 0;
    for (unsigned i = 0; i < n; i++) if (all[i].start == at->start && all[i].size == at->size) ok = 1;
    if (!ok) return 2; /* NVML_ERROR_INVALID_ARGUMENT */
    for (int i = 0; i < mig_count; i++)
        if (migs[i].gpu == d->index && placed(d->index, migs[i].gi, &other) &&
            other.start < at->start + at->size && at->start < other.start + other.size)
            return 23; /* NVML_ERROR_INSUFFICIENT_RESOURCES */
    int code = nvmlDeviceCreateGpuInstance(d, profile, gi);
    if (code) return code;
    FILE *f = fopen(STUB_STATE ".migplace", "a");
    if (f) { fprintf(f, "%d %d %u %u\n", d->index, (*gi)->gi, at->start, at->size); fclose(f); }
    return 0;
}
int nvmlGpuInstanceGetInfo(gi_t *gi, gi_instance_info_t *info) {
    memset(info, 0, sizeof *info);
    devices[gi->gpu].index = gi->gpu;
    devices[gi->gpu].mig = -1;
    info->device = &devices[gi->gpu];
    info->id = (unsigned)gi->gi;
    if (!placed(gi->gpu, gi->gi, &info->placement)) { info->placement.start = 0; info->placement.size = gi->slices; }
    return 0;
}
