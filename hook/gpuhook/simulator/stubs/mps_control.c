/* Stub nvidia-cuda-mps-control for simulated hosts. `-d`: a daemon of its own session that writes its pid to
   $CUDA_MPS_PIPE_DIRECTORY/nvidia-cuda-mps-control.pid, makes a `control` file there, appends what it was started
   for ($CUDA_VISIBLE_DEVICES) to $CUDA_MPS_LOG_DIRECTORY/control.log and waits; on SIGTERM it removes both files
   and ends. Without `-d`: reads commands on stdin; `quit` ends the daemon of that pipe directory (as the real one's
   shell does). Anything else is refused. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char pid_path[4096], control_path[4096];

static void on_term(int sig) {
    (void)sig;
    unlink(control_path);
    unlink(pid_path);
    _exit(0);
}

int main(int argc, char **argv) {
    const char *pipe_dir = getenv("CUDA_MPS_PIPE_DIRECTORY");
    const char *log_dir = getenv("CUDA_MPS_LOG_DIRECTORY");
    if (!pipe_dir) pipe_dir = "/tmp/nvidia-mps";
    snprintf(pid_path, sizeof pid_path, "%s/nvidia-cuda-mps-control.pid", pipe_dir);
    snprintf(control_path, sizeof control_path, "%s/control", pipe_dir);
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
        FILE *f = fopen(control_path, "w");
        if (f) fclose(f);
        if (log_dir) {
            char log_path[4096];
            snprintf(log_path, sizeof log_path, "%s/control.log", log_dir);
            FILE *l = fopen(log_path, "a");
            if (l) { fprintf(l, "started for %s\n", getenv("CUDA_VISIBLE_DEVICES") ? getenv("CUDA_VISIBLE_DEVICES") : "all"); fclose(l); }
        }
        char tmp[4200];
        snprintf(tmp, sizeof tmp, "%s.tmp", pid_path);
        f = fopen(tmp, "w");
        if (!f) _exit(1);
        fprintf(f, "%d\n", (int)getpid());
        fclose(f);
        rename(tmp, pid_path);
        int null = open("/dev/null", 2);
        if (null >= 0) { dup2(null, 0); dup2(null, 1); dup2(null, 2); }
        for (;;) pause();
    }
    char line[256];
    while (fgets(line, sizeof line, stdin)) {
        if (strncmp(line, "quit", 4) != 0) { fprintf(stderr, "unknown command\n"); return 1; }
        FILE *f = fopen(pid_path, "r");
        int pid = 0;
        if (!f || fscanf(f, "%d", &pid) != 1) { fprintf(stderr, "Cannot find MPS control daemon process\n"); return 1; }
        fclose(f);
        kill(pid, SIGTERM);
        for (int i = 0; i < 400 && kill(pid, 0) == 0; i++) usleep(5000);
    }
    return 0;
}
