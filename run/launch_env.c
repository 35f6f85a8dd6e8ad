/* launch_env.c — handing a launched train to memsplit-rank (launch_env.h). */
#include "run/launch_env.h"
#include "run/exit.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stddef.h>
#include <unistd.h>

int ms_launch_env_size(void)
{
    const char *keys[] = { "OMPI_COMM_WORLD_SIZE", "PMIX_SIZE", "PMI_SIZE" };
    for (int i = 0; i < 3; i++) {
        const char *v = getenv(keys[i]);
        if (v && atoi(v) > 0) return atoi(v);
    }
    /* PMIx names the rank but may leave the size to the library */
    return getenv("PMIX_RANK") ? 1 : 0;
}

int ms_launch_wants_rank(int argc, char **argv)
{
    int n = ms_launch_env_size();
    if (n > 1) return 1;
    for (int i = 1; n == 1 && i < argc; i++)
        if (!strcmp(argv[i], "--plan") || !strncmp(argv[i], "--plan=", 7)) return 1;
    return 0;
}

int ms_launch_rank_path(char *out, size_t len)
{
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) {
        fprintf(stderr, "memsplit: cannot find this binary (/proc/self/exe): %s\n", strerror(errno));
        return -1;
    }
    self[n] = 0;
    char *slash = strrchr(self, '/');
    if (slash) *slash = 0;
    snprintf(out, len, "%s/memsplit-rank", slash ? self : ".");
    return 0;
}

int ms_launch_exec_rank(int argc, char **argv)
{
    char path[4200];
    if (ms_launch_rank_path(path, sizeof path)) return MS_EXIT_RUNTIME;
    char **av = calloc((size_t)argc + 1, sizeof *av);
    if (!av) return MS_EXIT_RUNTIME;
    av[0] = path;
    for (int i = 1; i < argc; i++) av[i] = argv[i];
    execv(path, av);
    fprintf(stderr,
            "memsplit: launched by mpirun or srun, train runs one rank per device as %s, which cannot start (%s); "
            "build it with make (it needs libopenmpi-dev)\n",
            path, strerror(errno));
    free(av);
    return MS_EXIT_RUNTIME;
}
