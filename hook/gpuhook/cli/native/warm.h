/* The client side of the warm helper (`gpuhook warm`, cli/warm.py): hand this process's call to a gpuhook
 * process that has already started Python and imported the GPU path, instead of starting one.
 *
 * Optional by design: any doubt returns WARM_DIRECT and the caller takes the direct path (execs Python), which does
 * exactly the same work. That is the answer when the socket is absent or refuses, when its server is not root
 * (SO_PEERCRED), when the call is too big, when no worker acknowledges within WARM_ACK_MS (a stopped or swamped
 * server never blocks a container, and holds none of its descriptors: they are sent only after the
 * acknowledgement), or, as WARM_LOST, when the worker ends without a result (it crashed, or was killed: the work is
 * idempotent, and the runtime's front end first puts back the config.json a lost worker may have edited). The worker
 * gets this process's stdin, stdout, stderr and working directory as descriptors (stdin may be a copy: a hook's
 * state, kept for the direct path), its argv, environment and umask, and its pid from the kernel (SO_PEERCRED); it
 * answers "exit N" (the call is done) or "exec PATH" (run the runtime, in this very process).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#ifndef WARM_SOCKET
#define WARM_SOCKET "/run/gpuhook/warm.sock"
#endif
#define WARM_ACK_MS 1000
#define WARM_MAX (64 << 10)
#define WARM_DIRECT (-1)
#define WARM_LOST (-2) /* the call was handed over and its worker ended without an answer: it may have done some */

extern char **environ;

/* 0 and exit code in *code, or 1 and the runtime in exec_path, or WARM_DIRECT, or WARM_LOST (then direct too) */
static int warm_call(const char *kind, const char *exe, int argc, char **argv, int stdin_fd, int *code,
                     char *exec_path, size_t exec_len) {
    const char *path = getenv("GPUHOOK_WARM_SOCKET");
    if (!path) path = WARM_SOCKET;
    if (!*path || strlen(path) >= sizeof ((struct sockaddr_un *)0)->sun_path) return WARM_DIRECT;
    for (int fd = 1; fd < 3; fd++)
        if (fcntl(fd, F_GETFD) < 0) return WARM_DIRECT; /* a closed stdio: the direct path copes */
    if (fcntl(stdin_fd, F_GETFD) < 0) return WARM_DIRECT;
    static char msg[WARM_MAX];
    size_t len = 0;
    mode_t mask = umask(0);
    umask(mask);
    char mask_text[16], argc_text[16];
    snprintf(mask_text, sizeof mask_text, "%o", (unsigned)mask);
    snprintf(argc_text, sizeof argc_text, "%d", argc);
    /* NUL-separated: version, kind, umask, argc, exe, argv..., environ... */
#define WARM_PUT(s) do { size_t l_ = strlen(s) + 1; if (len + l_ > sizeof msg) return WARM_DIRECT; \
                         memcpy(msg + len, s, l_); len += l_; } while (0)
    WARM_PUT("gpuhook-warm/1");
    WARM_PUT(kind);
    WARM_PUT(mask_text);
    WARM_PUT(argc_text);
    WARM_PUT(exe);
    for (int i = 0; i < argc; i++) WARM_PUT(argv[i]);
    for (char **e = environ; *e; e++) WARM_PUT(*e);
#undef WARM_PUT
    int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (s < 0) return WARM_DIRECT;
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    strcpy(addr.sun_path, path);
    struct ucred peer;
    socklen_t peer_len = sizeof peer;
    int cwd = open(".", O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (cwd < 0 || connect(s, (struct sockaddr *)&addr, sizeof addr) != 0
        || getsockopt(s, SOL_SOCKET, SO_PEERCRED, &peer, &peer_len) != 0 || peer.uid != 0) {
        if (cwd >= 0) close(cwd);
        close(s);
        return WARM_DIRECT;
    }
    /* a worker says "A" once it holds the call: only then do this process's descriptors leave it (a stopped
     * daemon's queue must not keep the engine's pipes open after this process has gone its direct way) */
    char answer[4096 + 16];
    struct pollfd p = {.fd = s, .events = POLLIN};
    if (poll(&p, 1, WARM_ACK_MS) != 1 || recv(s, answer, sizeof answer, 0) != 1 || answer[0] != 'A') {
        close(cwd);
        close(s);
        return WARM_DIRECT;
    }
    int fds[4] = {stdin_fd, 1, 2, cwd};
    char control[CMSG_SPACE(sizeof fds)];
    memset(control, 0, sizeof control);
    struct iovec iov = {.iov_base = msg, .iov_len = len};
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = control, .msg_controllen = sizeof control};
    struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof fds);
    memcpy(CMSG_DATA(c), fds, sizeof fds);
    ssize_t sent = sendmsg(s, &mh, MSG_NOSIGNAL);
    close(cwd);
    if (sent != (ssize_t)len) {
        close(s);
        return WARM_DIRECT;
    }
    ssize_t n;
    do n = recv(s, answer, sizeof answer - 1, 0); while (n < 0 && errno == EINTR);
    close(s);
    if (n <= 0) return WARM_LOST; /* the worker ended without an answer */
    answer[n] = 0;
    if (strncmp(answer, "exit ", 5) == 0) {
        *code = atoi(answer + 5);
        return 0;
    }
    if (strncmp(answer, "exec /", 6) == 0 && (size_t)(n - 5) < exec_len) {
        memcpy(exec_path, answer + 5, (size_t)(n - 5) + 1);
        return 1;
    }
    return WARM_DIRECT; /* "direct", or anything else: the direct path */
}
