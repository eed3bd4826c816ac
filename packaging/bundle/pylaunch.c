/* The self-contained build's Python entry points (packaging/build-bundle.sh): one static executable, copied under
 * each entry's name into <build>/bin, that runs the build's own Python through the build's own loader and C
 * library, so that nothing of the host's userland (no python3, no glibc) is used and the build works wherever it
 * is copied (its place is read from /proc/self/exe, never from argv[0] or the environment).
 *
 *   <build>/bin/gpuhook ARGS    ->  <build>/lib/LOADER --library-path <build>/lib --argv0 <build>/bin/python3
 *                                   <build>/lib/gpuhook/python -I -S -c CODE <build>/bin/gpuhook ARGS
 *   <build>/bin/python3 ARGS    ->  the same, without -I -S -c CODE: a plain interpreter (sys.executable)
 *
 * CODE puts the build's packages first on sys.path, makes sys.argv[0] the entry's own path (gpuhook finds its
 * sibling executables beside it) and calls the entry's module (ENTRIES, made from gpuhook.cli.launcher.ENTRIES at
 * build time). --library-path is the loader's own option: unlike LD_LIBRARY_PATH it reaches no child process, so
 * the host programs gpuhook runs (runc, ldconfig) load the host's libraries. -I keeps PYTHON* variables and the
 * user's site directory away from a root process, as the launchers install.sh writes do.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "entries.h" /* LOADER, and ENTRIES: { "name", "module" }, ..., { NULL, NULL } */

static void die(const char *what, const char *path) {
    fprintf(stderr, "gpuhook: the self-contained build is incomplete: %s %s: %s (reinstall it)\n", what, path,
            strerror(errno));
    exit(127);
}

int main(int argc, char **argv) {
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) die("cannot read", "/proc/self/exe");
    self[n] = 0;
    char *slash = strrchr(self, '/');
    const char *name = slash + 1;
    char top[PATH_MAX];
    snprintf(top, sizeof top, "%.*s", (int)(slash - self), self); /* <build>/bin */
    char *up = strrchr(top, '/');
    if (!up) { errno = ENOENT; die("no build directory above", self); }
    *up = 0; /* <build> */
    if (strpbrk(top, "'\\\n")) { errno = EINVAL; die("a quote, backslash or newline in its path", top); }

    const char *module = NULL;
    if (strcmp(name, "python3") != 0) {
        for (int i = 0; ENTRIES[i][0]; i++)
            if (strcmp(ENTRIES[i][0], name) == 0) module = ENTRIES[i][1];
        if (!module) { errno = ENOENT; die("no entry point named", name); }
    }
    static char loader[PATH_MAX], libs[PATH_MAX], python[PATH_MAX], argv0[PATH_MAX], code[2 * PATH_MAX + 256];
    snprintf(loader, sizeof loader, "%s/lib/%s", top, LOADER);
    snprintf(libs, sizeof libs, "%s/lib", top);
    snprintf(python, sizeof python, "%s/lib/gpuhook/python", top);
    snprintf(argv0, sizeof argv0, "%s/bin/python3", top);

    char **out = calloc((size_t)argc + 16, sizeof *out);
    if (!out) die("no memory for", "arguments");
    int k = 0;
    out[k++] = loader;
    out[k++] = "--library-path";
    out[k++] = libs;
    out[k++] = "--argv0";
    out[k++] = argv0;
    out[k++] = python;
    if (module) {
        snprintf(code, sizeof code,
                 "import sys\ndel sys.argv[0]\nsys.path[:0] = ['%s/lib/python3/dist-packages']\n"
                 "from %s import main\nsys.exit(main())\n", top, module);
        out[k++] = "-I";
        out[k++] = "-S";
        out[k++] = "-c";
        out[k++] = code;
        out[k++] = self;
    }
    for (int i = 1; i < argc; i++) out[k++] = argv[i];
    out[k] = NULL;
    execv(loader, out);
    die("cannot execute", loader);
    return 127;
}
