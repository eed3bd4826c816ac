/* Shared by the stateful stubs (nvml.c, amd_smi.c): every change is appended to STUB_STATE.log, and a line
   "<index> <call>" in STUB_STATE.fail makes that call fail, so tests can count applies and restores and
   inject failures. STUB_STATE is the state file's path, defined at build time. */
#include <stdio.h>
#include <string.h>

static void log_call(const char *what, int i, unsigned long long a, unsigned long long b) {
    FILE *f = fopen(STUB_STATE ".log", "a");
    if (f) { fprintf(f, "%s %d %llu %llu\n", what, i, a, b); fclose(f); }
}

static int must_fail(int i, const char *call) {
    FILE *f = fopen(STUB_STATE ".fail", "r");
    if (!f) return 0;
    int j; char name[64]; int hit = 0;
    while (fscanf(f, "%d %63s", &j, name) == 2) if (j == i && strcmp(name, call) == 0) hit = 1;
    fclose(f);
    return hit;
}

/* Telemetry (the exporter's): STUB_STATE.telemetry holds "<index> <util %> <memory used> <memory total> <power mW>
   <temperature C> <clock MHz>" lines (gpuhook.simulator.telemetry writes them); a GPU without a line reports
   `idle`, the stub's own idle board. */
typedef struct { unsigned util; unsigned long long used, total; unsigned power, temp, clock; } telemetry_t;

static telemetry_t read_telemetry(int index, telemetry_t idle) {
    FILE *f = fopen(STUB_STATE ".telemetry", "r");
    if (!f) return idle;
    int i; telemetry_t r, t = idle;
    while (fscanf(f, "%d %u %llu %llu %u %u %u", &i, &r.util, &r.used, &r.total, &r.power, &r.temp, &r.clock) == 7)
        if (i == index) t = r;
    fclose(f);
    return t;
}
