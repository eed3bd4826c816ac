/* Stub libamd_smi.so for simulated hosts: the calls gpuhook makes, with state in STUB_STATE (one line per
   GPU: index perf_level power_cap_uW sclk_lo sclk_hi), changes appended to STUB_STATE.log, and failures on
   demand ("<index> <call>" lines in STUB_STATE.fail). GPUs sit at PCI 0000:<0x80+index>:00.0, as the
   simulator puts them. Every other symbol the amdsmi package binds is generated below, "not supported". */
#include <stdint.h>
#include <stdio.h>
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
