// Shared by the floor benchmarks (store-floor.c, write-floor.c).
#include <sys/resource.h>

// CPU time this process has used (user + system), in seconds.
static double cpu_seconds(void) {
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return u.ru_utime.tv_sec + u.ru_utime.tv_usec / 1e6 + u.ru_stime.tv_sec + u.ru_stime.tv_usec / 1e6;
}

// Times this process has given up its core, willing (a sleep) or not (preempted): what a
// gateway doing the same work at the same rate pays in wake-ups at the least.
static long context_switches(void) {
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return u.ru_nvcsw + u.ru_nivcsw;
}
