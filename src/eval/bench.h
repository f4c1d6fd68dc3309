/* eval/bench.h — timing of prompt processing and generation as llama-bench runs them,
 * statistics of the samples, the interleaved pass order, the read bandwidth and the
 * measurement record: all public now (nibble.h, "benchmarking"); this header remains
 * for the library's own files and tests that include it. */
#ifndef NB_EVAL_BENCH_H
#define NB_EVAL_BENCH_H

#include <stdint.h>

#include "nibble.h"

#endif
