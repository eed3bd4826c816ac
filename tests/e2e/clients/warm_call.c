/* A caller of the warm helper for tests/e2e/test_warm_callers.py, built static so that it runs in any container:
 *   warm_call SOCKET KIND STDIN_FILE EXE ARGC ARG... [ENV...]
 * connects, waits for the helper's "A", sends one call as gpuhook's native front ends do (cli/native/warm.h:
 * version, kind, umask, argc, exe, argv, env, each NUL-terminated) with stdin (from STDIN_FILE), stdout, stderr
 * and the working directory, then prints every answer on one line ("direct", "exit N", "exec PATH").
 * Exit 0 when answered, 3 when the socket cannot be reached. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc < 6) { fprintf(stderr, "usage: warm_call SOCKET KIND STDIN EXE ARGC ARG... [ENV...]\n"); return 2; }
    int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    snprintf(addr.sun_path, sizeof addr.sun_path, "%s", argv[1]);
    if (s < 0 || connect(s, (struct sockaddr *)&addr, sizeof addr) != 0) {
        printf("connect: %s\n", strerror(errno));
        return 3;
    }
    char ack[8];
    if (recv(s, ack, sizeof ack, 0) != 1 || ack[0] != 'A') { printf("no ack\n"); return 1; }
    static char msg[65536];
    size_t len = 0;
    int nargs = atoi(argv[5]);
    const char *head[] = {"gpuhook-warm/1", argv[2], "22", argv[5], argv[4]};
    for (int i = 0; i < 5; i++) { size_t l = strlen(head[i]) + 1; memcpy(msg + len, head[i], l); len += l; }
    for (int i = 6; i < argc; i++) { size_t l = strlen(argv[i]) + 1; memcpy(msg + len, argv[i], l); len += l; }
    (void)nargs;
    int fds[4] = {open(argv[3], O_RDONLY), 1, 2, open(".", O_RDONLY | O_DIRECTORY)};
    char control[CMSG_SPACE(sizeof fds)];
    struct iovec iov = {.iov_base = msg, .iov_len = len};
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = control, .msg_controllen = sizeof control};
    struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof fds);
    memcpy(CMSG_DATA(c), fds, sizeof fds);
    if (sendmsg(s, &mh, 0) < 0) { printf("send: %s\n", strerror(errno)); return 1; }
    char answer[4096];
    ssize_t n;
    while ((n = recv(s, answer, sizeof answer - 1, 0)) > 0) {
        answer[n] = 0;
        printf("%s\n", answer);
    }
    return 0;
}
