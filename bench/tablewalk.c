/* What libwebsockets' close-time consistency check costs for a descriptor table of each size: the
 * distribution's build walks the whole table (one pointer an entry, each non-empty one read) on
 * every close, looking for the descriptor that closed. Prints µs a walk; COLD=1 touches 4 MB of
 * other memory before each walk.
 * Usage: cc -O2 -o /tmp/tablewalk bench/tablewalk.c && taskset -c 1 /tmp/tablewalk */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

struct connection { char state[0x308]; int fd; };  /* the descriptor sits where lws 4.1 keeps it */

static double nanoseconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

int main(void) {
    const long sizes[] = {1024, 4096, 16384, 20000, 65536, 262144, 1048576};
    const int cold = getenv("COLD") != NULL;
    char *other = malloc(4 << 20);
    for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
        const long entries = sizes[s];
        struct connection **table = calloc(entries, sizeof *table);
        struct connection *open = calloc(64, sizeof *open);
        for (int i = 0; i < 64; i++) { open[i].fd = i + 10; table[i + 10] = &open[i]; }
        const int walks = entries > 100000 ? 50 : 500;
        double total = 0;
        volatile long found = 0;
        for (int w = 0; w < walks; w++) {
            if (cold) for (long j = 0; j < (4 << 20); j += 64) other[j]++;
            const double started = nanoseconds();
            struct connection **p = table, **end = table + entries;
            while (p != end && (!*p || (*p)->fd != 5)) p++;  /* 5: the descriptor just closed */
            found += p != end;
            total += nanoseconds() - started;
        }
        printf("%8ld entries: %7.1f us a close (%s)\n", entries, total / walks / 1000, cold ? "cold" : "warm");
        free(open);
        free(table);
    }
    free(other);
    return 0;
}
