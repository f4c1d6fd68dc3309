/* core/timer.h — monotonic time. */
#ifndef NB_CORE_TIMER_H
#define NB_CORE_TIMER_H

#include <stdint.h>

/* Nanoseconds from an arbitrary fixed point (CLOCK_MONOTONIC). */
uint64_t nb_time_ns(void);
static inline double nb_time_s(void) { return (double)nb_time_ns() * 1e-9; }

#endif
