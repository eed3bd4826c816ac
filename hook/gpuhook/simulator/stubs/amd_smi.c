/* Stub libamd_smi.so for simulated hosts: the calls gpuhook makes, with state in STUB_STATE (one line per
   GPU: index perf_level power_cap_uW sclk_lo sclk_hi), changes appended to STUB_STATE.log, and failures on
   demand ("<index> <call>" lines in STUB_STATE.fail). GPUs sit at PCI 0000:<0x80+index>:00.0, as the
   simulator puts them. Telemetry comes from STUB_STATE.telemetry, as the stub NVML's (an idle MI300X without a
   line). Every other symbol the amdsmi package binds is generated below, "not supported". */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static unsigned perf[256];
static uint64_t cap[256], lo[256], hi[256];

static void load_state(void) {
    for (int i = 0; i < 256; i++) { perf[i] = 0; cap[i] = 300000000ULL; lo[i] = hi[i] = 0; }
    FILE *f = fopen(STUB_STATE, "r");
    if (!f) return;
    int i; unsigned p; unsigned long long c, a, b;
    while (fscanf(f, "%d %u %llu %llu %llu", &i, &p, &c, &a, &b) == 5)
        if (i >= 0 && i < 256) { perf[i] = p; cap[i] = c; lo[i] = a; hi[i] = b; }
    fclose(f);
}

static void save_state(void) {
    FILE *f = fopen(STUB_STATE ".tmp", "w");
    if (!f) return;
    for (int i = 0; i < STUB_AMD_GPUS; i++)
        fprintf(f, "%d %u %llu %llu %llu\n", i, perf[i], (unsigned long long)cap[i], (unsigned long long)lo[i],
                (unsigned long long)hi[i]);
    fclose(f);
    rename(STUB_STATE ".tmp", STUB_STATE);
}

#include "stub_state.h"

static int index_of(void *h) { return (int)((intptr_t)h - 1); }

int amdsmi_init(uint64_t flags) { (void)flags; return 0; }
int amdsmi_shut_down(void) { return 0; }
int amdsmi_get_socket_handles(uint32_t *count, void **sockets) {
    if (sockets && *count >= 1) sockets[0] = (void *)1;
    *count = 1;
    return 0;
}
int amdsmi_get_processor_handles(void *socket, uint32_t *count, void **procs) {
    (void)socket;
    if (procs) for (uint32_t i = 0; i < *count && i < STUB_AMD_GPUS; i++) procs[i] = (void *)(intptr_t)(i + 1);
    *count = STUB_AMD_GPUS;
    return 0;
}
int amdsmi_get_gpu_device_bdf(void *h, uint64_t *bdf) {
    *bdf = ((uint64_t)(0x80 + index_of(h)) << 8); /* function 0, device 0, bus 0x80+i, domain 0 */
    return 0;
}
int amdsmi_get_gpu_perf_level(void *h, uint32_t *level) { load_state(); *level = perf[index_of(h)]; return 0; }
int amdsmi_set_gpu_perf_level(void *h, uint32_t level) {
    int i = index_of(h);
    if (must_fail(i, "perf_level")) return 1; /* AMDSMI_STATUS_INVAL */
    load_state(); perf[i] = level; save_state(); log_call("set-perf-level", i, level, 0);
    return 0;
}
typedef struct { uint64_t power_cap, default_power_cap, dpm_cap, min_power_cap, max_power_cap, reserved[3]; } cap_info_t;
int amdsmi_get_power_cap_info(void *h, uint32_t sensor, cap_info_t *info) {
    (void)sensor; load_state();
    memset(info, 0, sizeof *info);
    info->power_cap = cap[index_of(h)]; info->default_power_cap = 300000000ULL;
    info->min_power_cap = 100000000ULL; info->max_power_cap = 750000000ULL;
    return 0;
}
int amdsmi_set_power_cap(void *h, uint32_t sensor, uint64_t value) {
    int i = index_of(h); (void)sensor;
    if (must_fail(i, "power_cap")) return 1;
    load_state(); cap[i] = value; save_state(); log_call("set-power-cap", i, value, 0);
    return 0;
}
int amdsmi_set_gpu_clk_range(void *h, uint64_t min, uint64_t max, uint32_t clk_type) {
    int i = index_of(h); (void)clk_type;
    if (must_fail(i, "sclk")) return 1;
    load_state(); lo[i] = min; hi[i] = max; save_state(); log_call("set-sclk", i, min, max);
    return 0;
}

/* Telemetry (stub_state.h): a GPU without a line reports an idle MI300X; the clock is the sclk. */
static telemetry_t telemetry(int index) {
    return read_telemetry(index, (telemetry_t){0, 296747008ULL, 205822885888ULL, 140000, 40, 2100});
}
typedef struct { uint32_t gfx_activity, umc_activity, mm_activity, reserved[13]; } engine_usage_t;
int amdsmi_get_gpu_activity(void *h, engine_usage_t *u) {
    telemetry_t t = telemetry(index_of(h));
    memset(u, 0, sizeof *u);
    u->gfx_activity = t.util; u->umc_activity = t.util / 2; u->mm_activity = 0;
    return 0;
}
int amdsmi_get_gpu_memory_total(void *h, uint32_t type, uint64_t *total) {
    if (type != 0) return 2; /* VRAM only */
    *total = telemetry(index_of(h)).total;
    return 0;
}
int amdsmi_get_gpu_memory_usage(void *h, uint32_t type, uint64_t *used) {
    if (type != 0) return 2;
    *used = telemetry(index_of(h)).used;
    return 0;
}
typedef struct __attribute__((packed)) {
    uint64_t socket_power; uint32_t current_socket_power, average_socket_power;
    uint64_t gfx_voltage, soc_voltage, mem_voltage; uint32_t power_limit; uint8_t pad[4]; uint64_t reserved[18];
} power_info_t;
int amdsmi_get_power_info(void *h, power_info_t *p) { /* W, as on an MI300X: no average (0xFFFF) */
    int i = index_of(h);
    telemetry_t t = telemetry(i);
    load_state();
    memset(p, 0, sizeof *p);
    p->socket_power = t.power / 1000; p->current_socket_power = t.power / 1000; p->average_socket_power = 0xFFFF;
    p->power_limit = (uint32_t)(cap[i] / 1000000ULL);
    return 0;
}
int amdsmi_get_temp_metric(void *h, uint32_t sensor, uint32_t metric, int64_t *c) {
    if (sensor != 1 || metric != 0) return 2; /* the hotspot (junction) sensor's current value: an MI300X has no edge */
    *c = telemetry(index_of(h)).temp;
    return 0;
}
typedef struct __attribute__((packed)) {
    uint32_t clk, min_clk, max_clk; uint8_t clk_locked, clk_deep_sleep, pad[2]; uint32_t reserved[4];
} clk_info_t;
int amdsmi_get_clock_info(void *h, uint32_t type, clk_info_t *info) {
    int i = index_of(h);
    if (type != 0) return 2; /* gfx (sys) clock only */
    load_state();
    memset(info, 0, sizeof *info);
    info->clk = hi[i] ? (uint32_t)hi[i] : telemetry(i).clock; info->min_clk = 500; info->max_clk = 2100;
    info->clk_locked = hi[i] != 0;
    return 0;
}

/* Partition modes (gpuhook partition apply): the stub is the driver here, and a driver re-lays its devices when the
   mode changes; STUB_REACT (the simulator's own rebuild of this host, given at build time) does that for it. */
static const char *COMPUTE_NAMES[] = {"", "SPX", "DPX", "TPX", "QPX", "CPX"};
static int react(const char *what, int index, const char *mode) {
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "%s %s %d %s", STUB_REACT, what, index, mode);
    log_call(what, index, 0, 0);
    return system(cmd) == 0 ? 0 : 1;
}
int amdsmi_set_gpu_compute_partition(void *h, uint32_t mode) {
    int i = index_of(h);
    if (mode < 1 || mode > 5 || mode == 3 || must_fail(i, "compute_partition")) return 2; /* AMDSMI_STATUS_NOT_SUPPORTED */
    return react("compute-partition", i, COMPUTE_NAMES[mode]);
}
int amdsmi_set_gpu_memory_partition(void *h, uint32_t mode) {
    int i = index_of(h);
    char name[8];
    if ((mode != 1 && mode != 2 && mode != 4 && mode != 8) || must_fail(i, "memory_partition")) return 2;
    snprintf(name, sizeof name, "NPS%u", mode);
    return react("memory-partition", i, name);
}
