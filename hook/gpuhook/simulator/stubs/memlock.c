/* LD_PRELOAD for crun < 1.14 where the sandbox forbids raising RLIMIT_MEMLOCK (no CAP_SYS_RESOURCE): such crun
 * fails to start any container on cgroup v2 ("setrlimit (RLIM_MEMLOCK): Operation not permitted") although
 * Linux >= 5.11 charges BPF programs to the memory cgroup, not to that limit. It does what crun 1.14 itself
 * does (crun commit 93064574): where raising the limit is refused, raise the soft limit to the hard one. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <sys/resource.h>

int setrlimit(__rlimit_resource_t resource, const struct rlimit *limit) {
  int (*real)(__rlimit_resource_t, const struct rlimit *) =
      (int (*)(__rlimit_resource_t, const struct rlimit *))dlsym(RTLD_NEXT, "setrlimit");
  int rc = real(resource, limit);
  if (rc != 0 && errno == EPERM && resource == RLIMIT_MEMLOCK) {
    struct rlimit now;
    if (getrlimit(RLIMIT_MEMLOCK, &now) == 0) {
      now.rlim_cur = now.rlim_max;
      return real(RLIMIT_MEMLOCK, &now);
    }
  }
  return rc;
}
