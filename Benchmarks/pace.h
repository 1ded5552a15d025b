// Shared by the floor benchmarks when given a rate (store-floor.c, write-floor.c): sleeps until
// the n-th event is due at `rate` events per second, counted from the first call, so that the
// process sleeps between its bursts and pays each wake-up, as a server does at that rate.
#include <time.h>

static void pace(long n, double rate) {
    static struct timespec start;
    static int started;
    if (!started) {
        clock_gettime(CLOCK_MONOTONIC, &start);
        started = 1;
    }
    long long due = (long long)(n / rate * 1e9) + start.tv_nsec;
    struct timespec at = {start.tv_sec + due / 1000000000, due % 1000000000};
    clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &at, 0);
}
