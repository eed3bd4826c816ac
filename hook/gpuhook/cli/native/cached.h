/* What the Python side keeps for the native front ends beside its config cache (gpuhook/configfile.py): a file
 * per config, named by the config's path, whose first line is the config file's identity ("key DEV INO SIZE
 * MTIME CTIME", or "key absent" for a default config that does not exist). `.fast`: the resolved runtime and the
 * GPU node prefixes (runtime.c); `.state`: the config's state_dir (hook.c). A file is believed only when root
 * owns it and its directory, nobody else can write either, it is no symlink, and its key is the config's now;
 * the TOML is never parsed here. Any doubt: NULL, and the caller takes the Python path.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef CACHE_DIR
#define CACHE_DIR "/run/gpuhook/config-cache"
#endif
#define DEFAULT_CONFIG "/etc/gpuhook/config.toml"

static int cached_trusted(const struct stat *st) { return st->st_uid == geteuid() && !(st->st_mode & 022); }

/* The lines after the key of the config's `suffix` file, read into text (NUL-terminated); NULL when it is not
 * there, not trusted, or not this config's as it is now. */
static char *cached_lines(const char *suffix, char *text, size_t size) {
    const char *config = getenv("GPUHOOK_CONFIG");
    int named = config && *config;
    if (!named) config = DEFAULT_CONFIG;
    char key[256];
    struct stat cst;
    if (stat(config, &cst) == 0)
        snprintf(key, sizeof key, "key %llu %llu %lld %lld%09ld %lld%09ld", (unsigned long long)cst.st_dev,
                 (unsigned long long)cst.st_ino, (long long)cst.st_size, (long long)cst.st_mtim.tv_sec,
                 cst.st_mtim.tv_nsec, (long long)cst.st_ctim.tv_sec, cst.st_ctim.tv_nsec);
    else if (errno == ENOENT && !named)
        snprintf(key, sizeof key, "key absent");
    else
        return NULL; /* a config that must exist and does not: the Python side says so */
    char path[PATH_MAX * 3 + 64];
    int w = snprintf(path, sizeof path, "%s/", CACHE_DIR);
    for (const char *p = config; *p && w < (int)sizeof path - 8; p++)
        w += *p == '/' ? snprintf(path + w, sizeof path - w, "%%2F")
           : *p == '%' ? snprintf(path + w, sizeof path - w, "%%25") : snprintf(path + w, sizeof path - w, "%c", *p);
    snprintf(path + w, sizeof path - w, "%s", suffix);
    struct stat dst, fst;
    if (stat(CACHE_DIR, &dst) != 0 || !cached_trusted(&dst)) return NULL;
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return NULL;
    if (fstat(fd, &fst) != 0 || !S_ISREG(fst.st_mode) || !cached_trusted(&fst)) { close(fd); return NULL; }
    ssize_t n = read(fd, text, size - 1);
    close(fd);
    if (n <= 0) return NULL;
    text[n] = 0;
    char *rest = strchr(text, '\n');
    if (!rest || (size_t)(rest - text) != strlen(key) || strncmp(text, key, strlen(key)) != 0) return NULL;
    return rest + 1;
}
