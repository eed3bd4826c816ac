/* gpuhook-hook: the OCI hook's native front end. `gpuhook-hook hook STAGE` (argv as for `gpuhook`) hands the
 * stage to the warm helper when one runs (warm.h), else execs the Python `gpuhook` beside this binary with the
 * same argv. Called as nvidia-container-runtime-hook (Docker's --gpus hook, a link to this binary) it does the
 * same for NVIDIA's command line, the Python `nvidia-container-runtime-hook-py` beside it being the direct path;
 * its poststart and poststop have nothing to do (cli/nvidia_hook.py) and start nothing. The state runc writes on stdin is read first (bounded, as the hook reads it) into a memory file:
 * the helper reads that, and the direct path gets it back from the start, whatever the helper consumed.
 *
 * A poststop with nothing to restore starts nothing: when the config's state_dir (the `.state` file the Python
 * hook keeps, cached.h) has no tuning ledger, or one that holds no setting and no lease (gpuhook renders an
 * empty one in exactly one way: tuning/ledger.py; anything else goes to Python), no container has anything
 * to restore, and the container's record, the poststop's only other business, is pruned with the other dead
 * ones by the next reader (as a shim container's is).
 */
#define _GNU_SOURCE
#include <limits.h>
#include <sys/mman.h>

#include "cached.h"
#include "warm.h"

#define MAX_STATE (1 << 20) /* gpuhook.cli.hook.MAX_STATE: more is not a state */

/* Whether this call is a poststop (named, or the state's status says so) on a host without a tuning ledger. */
static int nothing_to_restore(int argc, char **argv, const char *state, size_t len) {
    int named = argc == 3 && strcmp(argv[1], "hook") == 0 && strcmp(argv[2], "poststop") == 0;
    int detected = argc == 2 && strcmp(argv[1], "hook") == 0
                   && (memmem(state, len, "\"status\":\"stopped\"", 19) || memmem(state, len, "\"status\": \"stopped\"", 20));
    if (!named && !detected) return 0;
    char text[PATH_MAX + 256];
    char *line = cached_lines(".state", text, sizeof text);
    if (!line || strncmp(line, "state /", 7) != 0) return 0;
    char *end = strchr(line, '\n');
    if (!end) return 0;
    *end = 0;
    char ledger[PATH_MAX + 32];
    if (snprintf(ledger, sizeof ledger, "%s/ledger.json", line + 6) >= (int)sizeof ledger) return 0;
    int fd = open(ledger, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return errno == ENOENT;
    struct stat lst;
    if (fstat(fd, &lst) != 0 || !S_ISREG(lst.st_mode)) { close(fd); return 0; } /* Python says what it is */
    char held[256];
    ssize_t n = read(fd, held, sizeof held - 1);
    close(fd);
    if (n <= 0) return 0;
    held[n] = 0;
    static const char head[] = "{\n \"leases\": {},\n \"seq\": ", tail[] = ",\n \"settings\": {},\n \"version\": 1\n}\n";
    if (strncmp(held, head, sizeof head - 1) != 0) return 0;
    char *p = held + sizeof head - 1;
    if (*p < '0' || *p > '9') return 0;
    while (*p >= '0' && *p <= '9') p++;
    return strcmp(p, tail) == 0;
}

int main(int argc, char **argv) {
    char self[PATH_MAX], py[PATH_MAX + 16];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) { perror("gpuhook-hook: /proc/self/exe"); return 1; }
    self[n] = 0;
    *strrchr(self, '/') = 0;
    const char *called = strrchr(argv[0], '/') ? strrchr(argv[0], '/') + 1 : argv[0];
    int gpus_hook = strcmp(called, "nvidia-container-runtime-hook") == 0;
    if (gpus_hook && argc >= 2 && (strcmp(argv[argc - 1], "poststart") == 0 || strcmp(argv[argc - 1], "poststop") == 0))
        return 0; /* NVIDIA's hook undoes nothing there, and neither does gpuhook's */
    snprintf(py, sizeof py, gpus_hook ? "%s/nvidia-container-runtime-hook-py" : "%s/gpuhook", self);
    int state = memfd_create("gpuhook-state", MFD_CLOEXEC);
    if (state >= 0) {
        static char buf[65536];
        ssize_t got, total = 0;
        while (total <= MAX_STATE && (got = read(0, buf, sizeof buf)) != 0) {
            if (got < 0) { if (errno == EINTR) continue; break; }
            if (write(state, buf, (size_t)got) != got) break;
            total += got;
        }
        ssize_t seen = total <= (ssize_t)sizeof buf ? pread(state, buf, sizeof buf, 0) : -1; /* the whole state */
        if (seen > 0 && nothing_to_restore(argc, argv, buf, (size_t)seen)) return 0;
        lseek(state, 0, SEEK_SET);
        int code;
        char unused[16];
        if (warm_call("hook", py, argc, argv, state, &code, unused, sizeof unused) == 0) return code;
        lseek(state, 0, SEEK_SET);
        dup2(state, 0);
    }
    execv(py, argv);
    fprintf(stderr, "gpuhook-hook: cannot run %s: %s\n", py, strerror(errno));
    return 1;
}
