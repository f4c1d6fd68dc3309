/* insn_loop — the target program of the insn_count plugin's test (check.sh): runs a loop
 * of exactly 2 instructions (subs, b.ne) argv[1] times, so two runs' counts differ by
 * exactly 2 x the difference of their arguments (same digit count: the same parse). */
#include <stdlib.h>

int main(int argc, char **argv)
{
    long n = argc > 1 ? strtol(argv[1], NULL, 10) : 0;
#if defined(__aarch64__)
    __asm__ volatile("cbz %0, 2f\n1: subs %0, %0, #1\n b.ne 1b\n2:" : "+r"(n) : : "cc");
#else
    (void)n;
#endif
    return 0;
}
