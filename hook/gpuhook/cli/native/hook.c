/* gpuhook-hook: the OCI hook's native front end. `gpuhook-hook hook STAGE` (argv as for `gpuhook`) hands the
 * stage to the warm helper when one runs (warm.h), else execs the Python `gpuhook` beside this binary with the
 * same argv. The state runc writes on stdin is read first (bounded, as the hook reads it) into a memory file:
 * the helper reads that, and the direct path gets it back from the start, whatever the helper consumed.
 */
#define _GNU_SOURCE
#include <limits.h>
#include <sys/mman.h>

#include "warm.h"

#define MAX_STATE (1 << 20) /* gpuhook.cli.hook.MAX_STATE: more is not a state */

int main(int argc, char **argv) {
    char self[PATH_MAX], py[PATH_MAX + 16];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) { perror("gpuhook-hook: /proc/self/exe"); return 1; }
    self[n] = 0;
    *strrchr(self, '/') = 0;
    snprintf(py, sizeof py, "%s/gpuhook", self);
    int state = memfd_create("gpuhook-state", MFD_CLOEXEC);
    if (state >= 0) {
        static char buf[65536];
        ssize_t got, total = 0;
        while (total <= MAX_STATE && (got = read(0, buf, sizeof buf)) != 0) {
            if (got < 0) { if (errno == EINTR) continue; break; }
            if (write(state, buf, (size_t)got) != got) break;
            total += got;
        }
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
