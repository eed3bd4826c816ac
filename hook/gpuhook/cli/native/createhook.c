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
 *
 * ROOT "-" (a CDI spec's hook, which cannot know the container's root): the root is read from the OCI state runc
 * writes on stdin (its "bundle") and that bundle's config.json ("root": {"path"}, relative to the bundle or
 * absolute), both read bounded and non-blocking, as regular files only; MOUNTPOINT is made (0700) where missing.
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

#define MAX_STATE (1 << 20)  /* gpuhook.cli.hook.MAX_STATE */
#define MAX_SPEC (16 << 20)  /* native/runtime.c's */

static void die(const char *what, const char *path) {
    fprintf(stderr, "gpuhook-createhook: %s %s: %s\n", what, path, strerror(errno));
    exit(1);
}

/* --- the little JSON this needs: one string member of an object, by key --------------------------------------- */

static const char *skip_ws(const char *p, const char *end) {
    while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')) p++;
    return p;
}

/* past the string starting at p (on its opening quote); NULL if it does not end */
static const char *skip_string(const char *p, const char *end) {
    for (p++; p < end; p++) {
        if (*p == '\\') { p++; continue; }
        if (*p == '"') return p + 1;
    }
    return NULL;
}

/* past the value starting at p: a string, or anything else up to the end of its brackets */
static const char *skip_value(const char *p, const char *end) {
    if (p < end && *p == '"') return skip_string(p, end);
    int depth = 0;
    while (p < end) {
        if (*p == '"') { p = skip_string(p, end); if (!p) return NULL; continue; }
        if (*p == '{' || *p == '[') depth++;
        else if (*p == '}' || *p == ']') { if (depth == 0) return p; if (--depth == 0) return p + 1; }
        else if (depth == 0 && *p == ',') return p;
        p++;
    }
    return depth == 0 ? p : NULL;
}

/* The value of member `key` of the object at [p, end): its start (NULL where absent or not an object). Keys
 * with escapes never match (none of the two this looks for has one). */
static const char *member(const char *p, const char *end, const char *key) {
    p = skip_ws(p, end);
    if (p >= end || *p != '{') return NULL;
    p++;
    size_t klen = strlen(key);
    for (;;) {
        p = skip_ws(p, end);
        if (p >= end || *p != '"') return NULL;
        const char *k = p + 1, *after = skip_string(p, end);
        if (!after) return NULL;
        int match = (size_t)(after - 1 - k) == klen && memcmp(k, key, klen) == 0;
        p = skip_ws(after, end);
        if (p >= end || *p != ':') return NULL;
        p = skip_ws(p + 1, end);
        if (match) return p;
        p = skip_value(p, end);
        if (!p) return NULL;
        p = skip_ws(p, end);
        if (p < end && *p == ',') { p++; continue; }
        return NULL;
    }
}

/* The string value at p, unescaped into out (\" \\ \/ and the control escapes; \u refused); 0 or -1. */
static int string_at(const char *p, const char *end, char *out, size_t size) {
    if (!p || p >= end || *p != '"') return -1;
    size_t n = 0;
    for (p++; p < end && *p != '"'; p++) {
        char c = *p;
        if (c == '\\') {
            if (++p >= end) return -1;
            switch (*p) {
            case '"': case '\\': case '/': c = *p; break;
            case 'n': c = '\n'; break;
            case 't': c = '\t'; break;
            case 'r': c = '\r'; break;
            case 'b': c = '\b'; break;
            case 'f': c = '\f'; break;
            default: return -1;
            }
        }
        if (c == 0 || n + 1 >= size) return -1;
        out[n++] = c;
    }
    if (p >= end) return -1;
    out[n] = 0;
    return 0;
}

/* A regular file's whole content (at most max bytes), read without blocking on a FIFO; NULL on failure. */
static char *read_file(int fd, const char *what, size_t max, size_t *len) {
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) die("cannot read", what);
    if (!S_ISREG(st.st_mode) || (size_t)st.st_size > max) { errno = EINVAL; die("not a regular file of a sane size:", what); }
    char *buf = malloc((size_t)st.st_size + 1);
    if (!buf) die("out of memory for", what);
    size_t got = 0;
    ssize_t r;
    while (got < (size_t)st.st_size && (r = read(fd, buf + got, (size_t)st.st_size - got)) > 0) got += (size_t)r;
    close(fd);
    *len = got;
    return buf;
}

/* The container's root from the OCI state on stdin and its bundle's config.json, into `out`. */
static void root_from_state(char *out, size_t size) {
    static char state[MAX_STATE];
    size_t len = 0;
    ssize_t r;
    while (len < sizeof state && (r = read(0, state + len, sizeof state - len)) != 0) {
        if (r < 0) { if (errno == EINTR) continue; die("cannot read the OCI state from", "stdin"); }
        len += (size_t)r;
    }
    char bundle[4096], path[4096], spec_path[4200];
    if (string_at(member(state, state + len, "bundle"), state + len, bundle, sizeof bundle) != 0 || bundle[0] != '/') {
        errno = EINVAL;
        die("the OCI state on stdin has no absolute bundle:", "stdin");
    }
    snprintf(spec_path, sizeof spec_path, "%s/config.json", bundle);
    size_t slen;
    char *spec = read_file(open(spec_path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOFOLLOW), spec_path, MAX_SPEC, &slen);
    const char *root = member(spec, spec + slen, "root");
    if (string_at(root ? member(root, spec + slen, "path") : NULL, spec + slen, path, sizeof path) != 0 || !path[0]) {
        errno = EINVAL;
        die("no root.path gpuhook can read in", spec_path);
    }
    free(spec);
    if ((size_t)snprintf(out, size, path[0] == '/' ? "%s" : "%s/%s", path[0] == '/' ? path : bundle, path) >= size) {
        errno = ENAMETOOLONG;
        die("the container root is too long:", path);
    }
}

/* MOUNTPOINT and every directory above it (state_dir), root's and 0700, where missing (a CDI hook after a reboot),
 * as the Python refresh makes them (os.makedirs). */
static void make_mountpoint(const char *mnt) {
    char path[4096];
    if (snprintf(path, sizeof path, "%s", mnt) >= (int)sizeof path) { errno = ENAMETOOLONG; die("cannot make", mnt); }
    for (char *p = path + 1;; p++) {
        if (*p != '/' && *p != 0) continue;
        char was = *p;
        *p = 0;
        if (mkdir(path, 0700) != 0 && errno != EEXIST) die("cannot make", path);
        if (!was) break;
        *p = was;
    }
    /* state_dir and the mount point must be root's alone (apply/state_dir.check): a directory others may write
     * could be swapped for a link that carries the bind elsewhere */
    char *slash = strrchr(path, '/');
    for (int k = 0; k < 2; k++) {
        struct stat st;
        if (lstat(path, &st) != 0) die("cannot read", path);
        if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 022)) {
            errno = EPERM;
            die("not a directory of root's alone (state_dir must be one):", path);
        }
        if (!slash || slash == path) break;
        *slash = 0;  /* then its parent: state_dir */
    }
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
    make_mountpoint(mnt);
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
    static char from_state[4096];
    const char *rootpath = argv[1];
    if (strcmp(rootpath, "-") == 0) {
        root_from_state(from_state, sizeof from_state);
        rootpath = from_state;
    }
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
