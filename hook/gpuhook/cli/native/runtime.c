/* gpuhook-runtime's front end: the pass-through path, without starting Python.
 *
 * On `create`/`run` it reads <bundle>/config.json; if the bytes hold no GPU request marker
 * (gpuhook.dev/, or _VISIBLE_DEVICES: every vendor's env key ends so) and no GPU device node (the prefixes
 * the fast file lists, e.g. /dev/nvidia: --device, a device plugin) it execs the runtime with every argument
 * unchanged. Every other case, and any doubt, goes to the Python shim (gpuhook-runtime-py beside this
 * binary), which does the real work, or to the warm helper that has it loaded (warm.h) when one runs. The
 * runtime's path comes from the "fast" file the Python shim writes beside its config cache (cached.h).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cached.h"
#include "warm.h"

#define MAX_SPEC (16 << 20)

static char **args;
static int nargs;

/* The Python shim's work: by the warm helper when one runs (warm.h), else by starting gpuhook-runtime-py. */
static void to_python(void) {
    char self[PATH_MAX], py[PATH_MAX + 16];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) { perror("gpuhook-runtime: /proc/self/exe"); exit(1); }
    self[n] = 0;
    char *slash = strrchr(self, '/');
    *slash = 0;
    snprintf(py, sizeof py, "%s/gpuhook-runtime-py", self);
    int code;
    char runtime[PATH_MAX];
    switch (warm_call("runtime", py, nargs, args, 0, &code, runtime, sizeof runtime)) {
    case 0: exit(code);
    case 1: /* edited by the warm helper: the runtime runs in this process, as it would after Python */
        args[0] = runtime;
        execv(runtime, args);
        fprintf(stderr, "gpuhook-runtime: cannot execute the runtime %s: %s\n", runtime, strerror(errno));
        exit(1);
    }
    args[0] = py;
    execv(py, args);
    fprintf(stderr, "gpuhook-runtime: cannot run %s: %s\n", py, strerror(errno));
    exit(1);
}

static int has(const char *buf, size_t len, const char *needle) { return memmem(buf, len, needle, strlen(needle)) != NULL; }

int main(int argc, char **argv) {
    args = argv;
    nargs = argc;
    /* the runc command line: global flags, the command, its flags (bundle), the container id */
    const char *command = NULL, *bundle = ".";
    static const char *global_values[] = {"--root", "--log", "--log-format", "--criu", "--rootless", NULL};
    static const char *cmd_values[] = {"--bundle", "-b", "--console-socket", "--pid-file", "--preserve-fds", NULL};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char **values = command ? cmd_values : global_values;
        int takes = 0;
        for (int j = 0; values[j]; j++) {
            size_t l = strlen(values[j]);
            if (strncmp(a, values[j], l) == 0 && (a[l] == 0 || a[l] == '=')) {
                takes = 1;
                const char *v = a[l] == '=' ? a + l + 1 : (i + 1 < argc ? argv[i + 1] : "");
                if (command && (strcmp(values[j], "--bundle") == 0 || strcmp(values[j], "-b") == 0)) bundle = v;
                if (a[l] == 0) i++;
                break;
            }
        }
        if (!takes && a[0] != '-' && !command) command = a;
    }
    /* the runtime, from the fast file the Python shim keeps (cached.h) */
    char text[PATH_MAX + 512];
    char *runtime = cached_lines(".fast", text, sizeof text);
    if (!runtime) to_python();
    if (strncmp(runtime, "runtime /", 9) != 0) to_python();
    runtime += 8;
    char *end = strchr(runtime, '\n');
    if (!end) to_python();
    *end = 0;
    /* the GPU device node prefixes (from the vendors gpuhook knows): a spec with one goes to Python too */
    char *nodes = end + 1;
    if (strncmp(nodes, "nodes ", 6) != 0) to_python(); /* an older fast file: Python writes it anew */
    nodes += 6;
    char *nodes_end = strchr(nodes, '\n');
    if (!nodes_end) to_python();
    *nodes_end = 0;
    /* create/run: a GPU request anywhere in config.json goes to Python */
    if (!command) to_python(); /* --version, --help: let the Python shim pass them on */
    if (strcmp(command, "create") == 0 || strcmp(command, "run") == 0) {
        char spec_path[PATH_MAX];
        snprintf(spec_path, sizeof spec_path, "%s/config.json", bundle);
        int sfd = open(spec_path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
        if (sfd < 0) to_python();
        struct stat sst;
        if (fstat(sfd, &sst) != 0 || !S_ISREG(sst.st_mode) || sst.st_size > MAX_SPEC) to_python();
        char *buf = malloc((size_t)sst.st_size + 1);
        ssize_t got = 0, r;
        while (buf && got < sst.st_size && (r = read(sfd, buf + got, (size_t)(sst.st_size - got))) > 0) got += r;
        close(sfd);
        if (!buf || got != sst.st_size) to_python();
        /* every vendor's env key ends in _VISIBLE_DEVICES (gpuhook/vendors/registry.py): Python knows which */
        if (has(buf, (size_t)got, "gpuhook.dev/") || has(buf, (size_t)got, "_VISIBLE_DEVICES"))
            to_python();
        for (char *p = nodes; *p;) { /* GPU nodes without a request: Python records them, refuses a leased GPU */
            char *space = strchr(p, ' ');
            size_t len = space ? (size_t)(space - p) : strlen(p);
            if (len && memmem(buf, (size_t)got, p, len)) to_python();
            p += len + (space ? 1 : 0);
        }
        free(buf);
    }
    argv[0] = runtime;
    execv(runtime, argv);
    to_python(); /* the runtime moved: the Python shim finds it again, or says it is missing */
    return 1;
}
