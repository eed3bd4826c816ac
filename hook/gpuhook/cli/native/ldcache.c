/* gpuhook-ldcache: the container's linker-cache refresh, as a createContainer hook (shim mode).
 *
 *   gpuhook-ldcache ROOT MOUNTPOINT LDCONFIG N SRC1 DST1 ... SRCN DSTN DIR...
 *
 * The image controls its libraries' SONAMEs (one may hold "../") and its ld.so.conf, and ldconfig makes a
 * link named by each SONAME. In the container's mount namespace the volumes and bind mounts sit under ROOT,
 * so a crafted SONAME could make root write into a volume the container's user cannot write. So this moves
 * into a private mount namespace of its own, binds ROOT (not recursively: none of its submounts) on
 * MOUNTPOINT, binds back only gpuhook's own library mounts, read-only (SRC on DST, each DST opened inside
 * MOUNTPOINT with openat2 RESOLVE_IN_ROOT, so no image link leads a mount elsewhere), and execs the host's
 * ldconfig chrooted there: whatever it writes stays in the image's own filesystem. Errors: one line, exit 1.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

static void die(const char *what, const char *path) {
    fprintf(stderr, "gpuhook-ldcache: %s %s: %s\n", what, path, strerror(errno));
    exit(1);
}

static int open_in_root(int root, const char *path) {
    struct open_how how = {.flags = O_PATH | O_CLOEXEC, .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS};
    return (int)syscall(SYS_openat2, root, path, &how, sizeof how);
}

int main(int argc, char **argv) {
    if (argc < 5) {
        fprintf(stderr, "usage: gpuhook-ldcache ROOT MOUNTPOINT LDCONFIG N [SRC DST]... DIR...\n");
        return 2;
    }
    const char *root = argv[1], *mnt = argv[2], *ldconfig = argv[3];
    char *end;
    long n = strtol(argv[4], &end, 10);
    if (*end || n < 0 || 5 + 2 * n > argc) {
        fprintf(stderr, "gpuhook-ldcache: bad mount count %s\n", argv[4]);
        return 2;
    }
    if (unshare(CLONE_NEWNS) != 0) die("cannot unshare the mount namespace for", root);
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0) die("cannot make private", "/");
    if (mount(root, mnt, NULL, MS_BIND, NULL) != 0) die("cannot bind the container root on", mnt);
    int top = open(mnt, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (top < 0) die("cannot open", mnt);
    for (long i = 0; i < n; i++) {
        const char *src = argv[5 + 2 * i], *dst = argv[6 + 2 * i];
        int s = open(src, O_PATH | O_CLOEXEC);
        if (s < 0) die("cannot open the host's", src);
        int d = open_in_root(top, dst);
        if (d < 0) {
            if (errno == ENOENT) { close(s); continue; } /* runc made no such target: nothing to list */
            die("cannot open in the container root", dst);
        }
        char from[64], to[64];
        snprintf(from, sizeof from, "/proc/self/fd/%d", s);
        snprintf(to, sizeof to, "/proc/self/fd/%d", d);
        if (mount(from, to, NULL, MS_BIND | MS_REC, NULL) != 0) die("cannot bind the driver's", src);
        close(s);
        close(d);
        d = open_in_root(top, dst); /* the new mount, on top of what d pointed at */
        if (d < 0) die("cannot open in the container root", dst);
        snprintf(to, sizeof to, "/proc/self/fd/%d", d);
        if (mount(NULL, to, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY, NULL) != 0) die("cannot make read-only", dst);
        close(d);
    }
    int first = 5 + 2 * (int)n, dirs = argc - first;
    char **args = calloc((size_t)dirs + 4, sizeof *args);
    if (!args) die("out of memory for", ldconfig);
    args[0] = "ldconfig";
    args[1] = "-r";
    args[2] = (char *)mnt;
    for (int i = 0; i < dirs; i++) args[3 + i] = argv[first + i];
    char *env[] = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C", NULL};
    execve(ldconfig, args, env);
    die("cannot run", ldconfig);
    return 1;
}
