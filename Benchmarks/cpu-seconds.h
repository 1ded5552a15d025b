// Shared by the floor benchmarks (store-floor.c, write-floor.c).
#include <sys/resource.h>

// CPU time this process has used (user + system), in seconds.
static double cpu_seconds(void) {
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return u.ru_utime.tv_sec + u.ru_utime.tv_usec / 1e6 + u.ru_stime.tv_sec + u.ru_stime.tv_usec / 1e6;
}
