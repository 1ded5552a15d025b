// The floor of delivering an event to a connected device: one write(2) of an event-sized
// frame to that device's own TCP connection, 1,000 loopback connections taken in turn, a
// reader process draining them all. No HTTP/2 framing, no event loop: the system call alone
// (on loopback it also carries the receiving side's TCP processing, as the gateway's writes do).
// Prints the writer's CPU-seconds (user + system) per 100k writes.
//
//   write-floor CONNECTIONS WRITES BYTES [RATE GROUP]
//
// With RATE (writes per second) and GROUP, the writes go in bursts of GROUP, each when its first
// write is due at that rate, the process sleeping in between: the events of one commit, written
// in the wake-up that brings its completion, as the gateway's loop does at a moderate rate.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cpu-seconds.h"
#include "pace.h"

static void fail(const char *what) {
    perror(what);
    exit(1);
}

int main(int argc, char **argv) {
    if (argc != 4 && argc != 6) {
        fprintf(stderr, "usage: write-floor CONNECTIONS WRITES BYTES [RATE GROUP]\n");
        return 2;
    }
    int connections = atoi(argv[1]);
    long writes = atol(argv[2]);
    int bytes = atoi(argv[3]);
    double rate = argc == 6 ? atof(argv[4]) : 0;
    long group = argc == 6 ? atol(argv[5]) : 1;

    int listener = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in address = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t length = sizeof address;
    if (bind(listener, (struct sockaddr *)&address, sizeof address) || listen(listener, 4096) ||
        getsockname(listener, (struct sockaddr *)&address, &length))
        fail("listen");
    int *writers = calloc(connections, sizeof(int)), *readers = calloc(connections, sizeof(int));
    for (int i = 0; i < connections; i++) {
        writers[i] = socket(AF_INET, SOCK_STREAM, 0);
        if (connect(writers[i], (struct sockaddr *)&address, sizeof address)) fail("connect");
        int one = 1;
        setsockopt(writers[i], IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        readers[i] = accept(listener, 0, 0);
        if (readers[i] < 0) fail("accept");
    }

    pid_t reader = fork();
    if (reader == 0) {
        int poll = epoll_create1(0);
        for (int i = 0; i < connections; i++) {
            struct epoll_event event = {.events = EPOLLIN, .data.fd = readers[i]};
            epoll_ctl(poll, EPOLL_CTL_ADD, readers[i], &event);
        }
        struct epoll_event ready[256];
        char sink[65536];
        for (;;) {
            int n = epoll_wait(poll, ready, 256, -1);
            for (int i = 0; i < n; i++)
                if (read(ready[i].data.fd, sink, sizeof sink) <= 0) _exit(0);
        }
    }

    char *frame = malloc(bytes);
    memset(frame, 'x', bytes);
    double start = cpu_seconds();
    long switches = context_switches();
    for (long i = 0; i < writes; i++) {
        if (rate > 0 && i % group == 0) pace(i, rate);
        if (write(writers[i % connections], frame, bytes) != bytes) fail("write");
    }
    double used = cpu_seconds() - start;
    switches = context_switches() - switches;
    kill(reader, SIGKILL);
    waitpid(reader, 0, 0);
    printf("%.3f CPU-s per 100k writes (%d connections, %d bytes each), %.3f context switches per write\n",
           used / (writes / 1e5), connections, bytes, (double)switches / writes);
    return 0;
}
