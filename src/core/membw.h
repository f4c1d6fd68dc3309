/* core/membw.h — a quick measured memory read bandwidth, the ceiling of decode. */
#ifndef NB_CORE_MEMBW_H
#define NB_CORE_MEMBW_H

#include <stddef.h>

/* Best of `reps` passes reading a `bytes` buffer (much larger than the caches) on
 * n_threads threads; GB/s (1e9 bytes per second). 0 on allocation failure. */
double nb_measure_read_bw(int n_threads, size_t bytes, int reps);

#endif
