/* Stub nvidia-cuda-mps-control for simulated hosts. `-d`: a daemon of its own session that writes its pid to
   $CUDA_MPS_PIPE_DIRECTORY/nvidia-cuda-mps-control.pid, makes its control pipe (a FIFO, `control`) there, puts its
   shared memory in /dev/shm (`cuda.mps.control`, its pid and pipe directory: as the real daemon's server and
   clients meet in the POSIX shared memory of /dev/shm), appends what it was started for ($CUDA_VISIBLE_DEVICES) and
   later its quit to $CUDA_MPS_LOG_DIRECTORY/control.log, and reads commands from the pipe; `quit` there, or
   SIGTERM, removes its files and ends it. Without `-d`: reads commands on stdin and passes `quit` on through the
   control pipe (as the real one's shell talks to its daemon through its socket, never through the pid file),
   waiting until the pipe is gone; a daemon whose shared memory this process's /dev/shm lacks, or none reading the
   pipe, is "Cannot find MPS control daemon process" (the real shell, too, needs the daemon's /dev/shm). Anything
   else is refused. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define SHM_FILE "/dev/shm/cuda.mps.control"

static char pid_path[4096], control_path[4096], log_path[4096];

static void logged(const char *what) {
    if (!log_path[0]) return;
    FILE *l = fopen(log_path, "a");
    if (l) { fprintf(l, "%s\n", what); fclose(l); }
}

static void on_term(int sig) {
    (void)sig;
    logged("quit");
    unlink(SHM_FILE);
    unlink(control_path);
    unlink(pid_path);
    _exit(0);
}

/* Whether /dev/shm here holds the shared memory of the daemon serving `pipe_dir`. */
static int shares_memory(const char *pipe_dir) {
    char buf[4600], want[4200];
    FILE *f = fopen(SHM_FILE, "r");
    if (!f) return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    snprintf(want, sizeof want, " %s\n", pipe_dir);
    return strstr(buf, want) != NULL;
}

int main(int argc, char **argv) {
    const char *pipe_dir = getenv("CUDA_MPS_PIPE_DIRECTORY");
    const char *log_dir = getenv("CUDA_MPS_LOG_DIRECTORY");
    if (!pipe_dir) pipe_dir = "/tmp/nvidia-mps";
    snprintf(pid_path, sizeof pid_path, "%s/nvidia-cuda-mps-control.pid", pipe_dir);
    snprintf(control_path, sizeof control_path, "%s/control", pipe_dir);
    if (log_dir) snprintf(log_path, sizeof log_path, "%s/control.log", log_dir);
    if (argc > 1 && strcmp(argv[1], "-d") == 0) {
        if (access(pid_path, F_OK) == 0) { fprintf(stderr, "An instance of this daemon is already running\n"); return 1; }
        pid_t child = fork();
        if (child < 0) return 1;
        if (child > 0) {
            for (int i = 0; i < 200 && access(pid_path, F_OK) != 0; i++) usleep(5000);
            return access(pid_path, F_OK) == 0 ? 0 : 1;
        }
        setsid();
        signal(SIGTERM, on_term);
        unlink(control_path);
        if (mkfifo(control_path, 0666) != 0) _exit(1);
        int control = open(control_path, O_RDWR);
        if (control < 0) _exit(1);
        FILE *shm = fopen(SHM_FILE, "w");
        if (!shm) { logged("cannot create shared memory in /dev/shm"); _exit(1); }
        fprintf(shm, "%d %s\n", (int)getpid(), pipe_dir);
        fclose(shm);
        char said[300];
        snprintf(said, sizeof said, "started for %s", getenv("CUDA_VISIBLE_DEVICES") ? getenv("CUDA_VISIBLE_DEVICES") : "all");
        logged(said);
        char tmp[4200];
        snprintf(tmp, sizeof tmp, "%s.tmp", pid_path);
        FILE *f = fopen(tmp, "w");
        if (!f) _exit(1);
        fprintf(f, "%d\n", (int)getpid());
        fclose(f);
        rename(tmp, pid_path);
        int null = open("/dev/null", 2);
        if (null >= 0) { dup2(null, 0); dup2(null, 1); dup2(null, 2); }
        char buf[256];
        for (;;) {
            ssize_t n = read(control, buf, sizeof buf - 1);
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) { pause(); continue; }
            buf[n] = 0;
            if (strstr(buf, "quit")) on_term(0);
        }
    }
    char line[256];
    while (fgets(line, sizeof line, stdin)) {
        if (strncmp(line, "quit", 4) != 0) { fprintf(stderr, "unknown command\n"); return 1; }
        struct stat st;
        int control = -1;
        if (shares_memory(pipe_dir) && lstat(control_path, &st) == 0 && S_ISFIFO(st.st_mode))
            control = open(control_path, O_WRONLY | O_NONBLOCK);
        if (control < 0 || write(control, "quit\n", 5) != 5) { fprintf(stderr, "Cannot find MPS control daemon process\n"); return 1; }
        close(control);
        for (int i = 0; i < 400 && lstat(control_path, &st) == 0; i++) usleep(5000);
    }
    return 0;
}
