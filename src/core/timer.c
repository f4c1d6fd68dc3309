/* core/timer.c — monotonic time. */
#include "core/timer.h"

#include <time.h>

uint64_t nb_time_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}
