/* gpuhook-runtime's front end: the pass-through path, without starting Python.
 *
 * On `create`/`run` it reads <bundle>/config.json; if the bytes hold no GPU request marker
 * (gpuhook.dev/, or _VISIBLE_DEVICES: every vendor's env key ends so) and no GPU device node (the prefixes
 * the fast file lists, e.g. /dev/nvidia: --device, a device plugin) it execs the runtime with every argument
 * unchanged. Every other case, and any doubt, goes to the Python shim (gpuhook-runtime-py beside this
 * binary), which does the real work, or to the warm helper that has it loaded (warm.h) when one runs. The
 * runtime's path comes from the "fast" file the Python shim writes beside its config cache (cached.h).
 *
 * A warm worker that ends without an answer (killed, or crashed) may have edited config.json before it ended; the
 * direct path must start from the engine's spec, as the call did, so the bytes read here are put back first: a
 * refusal there then leaves config.json as the engine wrote it, and a GPU request is never planned twice over.
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

/* the runc command line's command and bundle */
static const char *command, *bundle = ".";
/* config.json as the engine wrote it, once read (read_spec), for put_back */
static char spec_path[PATH_MAX];
static char *spec_bytes;
static size_t spec_len;
static mode_t spec_mode;

static int creates(void) { return command && (strcmp(command, "create") == 0 || strcmp(command, "run") == 0); }

/* The bundle's config.json read whole (a regular file, at most MAX_SPEC, never waited on); 0 where it cannot be. */
static int read_spec(void) {
    if (spec_bytes) return 1;
    snprintf(spec_path, sizeof spec_path, "%s/config.json", bundle);
    int fd = open(spec_path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return 0;
    struct stat st;
    char *buf = NULL;
    ssize_t got = 0, r;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size <= MAX_SPEC) buf = malloc((size_t)st.st_size + 1);
    while (buf && got < st.st_size && (r = read(fd, buf + got, (size_t)(st.st_size - got))) > 0) got += r;
    close(fd);
    if (!buf || got != st.st_size) {
        free(buf);
        return 0;
    }
    spec_bytes = buf, spec_len = (size_t)got, spec_mode = st.st_mode;
    return 1;
}

/* config.json made the bytes read at the start again, where it no longer holds them (a lost worker's edit): a
 * temporary file in the bundle (O_EXCL, never through a link, as gpuhook/atomic.py writes), then a rename over it.
 * Where a link or nothing is there, it is left so (the direct path says what it finds); a failed write is said,
 * and the direct path edits config.json as it is. */
static void put_back(void) {
    if (!spec_bytes) return; /* unreadable from the start: the direct path says so */
    struct stat st;
    if (lstat(spec_path, &st) != 0 || !S_ISREG(st.st_mode)) return;
    if ((size_t)st.st_size == spec_len) {
        int fd = open(spec_path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        if (fd < 0) return;
        char *now = malloc(spec_len + 1);
        ssize_t got = 0, r;
        while (now && (size_t)got < spec_len && (r = read(fd, now + got, spec_len - (size_t)got)) > 0) got += r;
        close(fd);
        int same = now && (size_t)got == spec_len && memcmp(now, spec_bytes, spec_len) == 0;
        free(now);
        if (same) return;
    }
    char tmp[PATH_MAX];
    int w = snprintf(tmp, sizeof tmp, "%s/.config.json.%ld.restore", bundle, (long)getpid());
    int fd = w > 0 && (size_t)w < sizeof tmp
        ? open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600) : -1;
    size_t done = 0;
    ssize_t r = 0;
    while (fd >= 0 && done < spec_len && (r = write(fd, spec_bytes + done, spec_len - done)) > 0) done += (size_t)r;
    int ok = fd >= 0 && done == spec_len && fchmod(fd, spec_mode & 07777) == 0;
    if (fd >= 0 && close(fd) != 0) ok = 0;
    if (ok && rename(tmp, spec_path) == 0) return;
    int err = errno;
    if (fd >= 0) unlink(tmp);
    fprintf(stderr, "gpuhook-runtime: warning: the warm helper's worker ended mid-call and %s could not be put back "
            "as the engine wrote it (%s); the direct path edits it as it is\n", spec_path, strerror(err));
}

/* The Python shim's work: by the warm helper when one runs (warm.h), else by starting gpuhook-runtime-py. */
static void to_python(void) {
    char self[PATH_MAX], py[PATH_MAX + 16];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) { perror("gpuhook-runtime: /proc/self/exe"); exit(1); }
    self[n] = 0;
    char *slash = strrchr(self, '/');
    *slash = 0;
    snprintf(py, sizeof py, "%s/gpuhook-runtime-py", self);
    if (creates()) read_spec(); /* the engine's bytes, for put_back (read already where the fast file was there) */
    int code;
    char runtime[PATH_MAX];
    switch (warm_call("runtime", py, nargs, args, 0, &code, runtime, sizeof runtime)) {
    case 0: exit(code);
    case 1: /* edited by the warm helper: the runtime runs in this process, as it would after Python */
        args[0] = runtime;
        execv(runtime, args);
        fprintf(stderr, "gpuhook-runtime: cannot execute the runtime %s: %s\n", runtime, strerror(errno));
        exit(1);
    case WARM_LOST: put_back();
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
    if (creates()) {
        if (!read_spec()) to_python(); /* Python says what is wrong with it */
        /* every vendor's env key ends in _VISIBLE_DEVICES (gpuhook/vendors/registry.py): Python knows which */
        if (has(spec_bytes, spec_len, "gpuhook.dev/") || has(spec_bytes, spec_len, "_VISIBLE_DEVICES"))
            to_python();
        for (char *p = nodes; *p;) { /* GPU nodes without a request: Python records them, refuses a leased GPU */
            char *space = strchr(p, ' ');
            size_t len = space ? (size_t)(space - p) : strlen(p);
            if (len && memmem(spec_bytes, spec_len, p, len)) to_python();
            p += len + (space ? 1 : 0);
        }
    }
    argv[0] = runtime;
    execv(runtime, argv);
    to_python(); /* the runtime moved: the Python shim finds it again, or says it is missing */
    return 1;
}
