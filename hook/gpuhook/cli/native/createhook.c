/* gpuhook-createhook: the container's createContainer hook in shim mode, one process for what used to be a
 * shell + mount(8) per procfs copy and a linker-cache helper.
 *
 *   gpuhook-createhook ROOT [--proc SRC TARGET]... [--ldcache MOUNTPOINT LDCONFIG N SRC1 DST1 ... DIR...]
 *
 * runc runs it in the container's mount namespace before pivot_root, where ROOT/proc is already the
 * container's own procfs: no path there belongs to the image.
 *
 * --proc: a read-only copy of a procfs directory over the container's (runc allows no spec mounts in /proc).
 * SRC is a host directory holding the copy as SRC/<name of TARGET>; when the kernel has no TARGET directory
 * (a simulated host) the copy goes over TARGET's parent, holding the directory inside. The target is opened
 * inside ROOT with openat2 RESOLVE_IN_ROOT, bound, and the new mount remounted ro,nosuid,nodev,noexec.
 *
 * --ldcache (last): the image controls its libraries' SONAMEs (one may hold "../") and its ld.so.conf, and
 * ldconfig makes a link named by each SONAME. In the container's mount namespace the volumes and bind mounts
 * sit under ROOT, so a crafted SONAME could make root write into a volume the container's user cannot write.
 * So this moves into a private mount namespace of its own, binds ROOT (not recursively: none of its
 * submounts, nor the procfs copies) on MOUNTPOINT, binds back only gpuhook's own library mounts, read-only
 * (SRC on DST, each DST opened inside MOUNTPOINT with RESOLVE_IN_ROOT, so no image link leads a mount
 * elsewhere), and execs the host's ldconfig chrooted there with a fixed environment: whatever it writes
 * stays in the image's own filesystem. Errors: one line naming the path, exit 1.
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
    fprintf(stderr, "gpuhook-createhook: %s %s: %s\n", what, path, strerror(errno));
    exit(1);
}

static int open_in_root(int root, const char *path, int flags) {
    struct open_how how = {.flags = O_PATH | O_CLOEXEC | flags, .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS};
    return (int)syscall(SYS_openat2, root, path, &how, sizeof how);
}

/* Bind the open `source` on the open `target`, then make the new mount (reopened by `path` inside `root`)
 * read-only with `extra` flags. */
static void bind_readonly(int source, int target, int root, const char *path, unsigned long extra, int rec) {
    char from[64], to[64];
    snprintf(from, sizeof from, "/proc/self/fd/%d", source);
    snprintf(to, sizeof to, "/proc/self/fd/%d", target);
    if (mount(from, to, NULL, MS_BIND | (rec ? MS_REC : 0), NULL) != 0) die("cannot bind on", path);
    close(target);
    int top = open_in_root(root, path, 0); /* the new mount, on top of what target pointed at */
    if (top < 0) die("cannot open in the container root", path);
    snprintf(to, sizeof to, "/proc/self/fd/%d", top);
    if (mount(NULL, to, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | extra, NULL) != 0) die("cannot make read-only", path);
    close(top);
}

static void proc_copy(int root, const char *src, const char *target) {
    char parent[4096], copy[4096];
    const char *slash = strrchr(target, '/');
    if (!slash || snprintf(parent, sizeof parent, "%.*s", (int)(slash - target), target) >= (int)sizeof parent
        || snprintf(copy, sizeof copy, "%s/%s", src, slash + 1) >= (int)sizeof copy) {
        errno = ENAMETOOLONG;
        die("bad procfs target", target);
    }
    const char *at = target, *from = copy;
    int t = open_in_root(root, target, O_DIRECTORY);
    if (t < 0) { /* no such directory in this kernel's procfs: the copy goes over its parent */
        at = parent;
        from = src;
        t = open_in_root(root, parent, O_DIRECTORY);
        if (t < 0) die("cannot open in the container root", parent);
    }
    int s = open(from, O_PATH | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
    if (s < 0) die("cannot open the procfs copy", from);
    bind_readonly(s, t, root, at, MS_NOSUID | MS_NODEV | MS_NOEXEC, 0);
    close(s);
}

static void ldcache(const char *rootpath, int argc, char **argv, int i) {
    if (i + 3 > argc) { fprintf(stderr, "gpuhook-createhook: --ldcache needs MOUNTPOINT LDCONFIG N\n"); exit(2); }
    const char *mnt = argv[i], *ldconfig = argv[i + 1];
    char *end;
    long n = strtol(argv[i + 2], &end, 10);
    if (*end || n < 0 || i + 3 + 2 * n > argc) {
        fprintf(stderr, "gpuhook-createhook: bad mount count %s\n", argv[i + 2]);
        exit(2);
    }
    if (unshare(CLONE_NEWNS) != 0) die("cannot unshare the mount namespace for", rootpath);
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0) die("cannot make private", "/");
    if (mount(rootpath, mnt, NULL, MS_BIND, NULL) != 0) die("cannot bind the container root on", mnt);
    int top = open(mnt, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (top < 0) die("cannot open", mnt);
    for (long k = 0; k < n; k++) {
        const char *src = argv[i + 3 + 2 * k], *dst = argv[i + 4 + 2 * k];
        int s = open(src, O_PATH | O_CLOEXEC);
        if (s < 0) die("cannot open the host's", src);
        int d = open_in_root(top, dst, 0);
        if (d < 0) {
            if (errno == ENOENT) { close(s); continue; } /* runc made no such target: nothing to list */
            die("cannot open in the container root", dst);
        }
        bind_readonly(s, d, top, dst, 0, 1);
        close(s);
    }
    int first = i + 3 + 2 * (int)n, dirs = argc - first;
    char **args = calloc((size_t)dirs + 4, sizeof *args);
    if (!args) die("out of memory for", ldconfig);
    args[0] = "ldconfig";
    args[1] = "-r";
    args[2] = (char *)mnt;
    for (int k = 0; k < dirs; k++) args[3 + k] = argv[first + k];
    char *env[] = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C", NULL};
    execve(ldconfig, args, env);
    die("cannot run", ldconfig);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: gpuhook-createhook ROOT [--proc SRC TARGET]... [--ldcache MOUNTPOINT LDCONFIG N "
                        "[SRC DST]... DIR...]\n");
        return 2;
    }
    const char *rootpath = argv[1];
    int i = 2, root = -1;
    while (i < argc && strcmp(argv[i], "--proc") == 0) {
        if (i + 2 >= argc) { fprintf(stderr, "gpuhook-createhook: --proc needs SRC TARGET\n"); return 2; }
        if (root < 0 && (root = open(rootpath, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0) die("cannot open", rootpath);
        proc_copy(root, argv[i + 1], argv[i + 2]);
        i += 3;
    }
    if (root >= 0) close(root);
    if (i < argc && strcmp(argv[i], "--ldcache") == 0) ldcache(rootpath, argc, argv, i + 1);
    if (i < argc) { fprintf(stderr, "gpuhook-createhook: unexpected argument %s\n", argv[i]); return 2; }
    return 0;
}
