/* perflab's link-order workload: main calls the hot loops of three other
 * translation units (linkorder_a.c, _b.c, _c.c) in a loop, inside the probe.
 *
 * Each hot loop is a few instructions ending in a conditional branch; where
 * the linker places it (its address mod 32 and 64) decides how it falls on
 * the front end's fetch and decoded-uop-cache lines, which is what a link
 * order changes (Mytkowicz et al., ASPLOS 2009, section 4).  Alignment is
 * left to the compiler's defaults: nothing here forces it.
 *
 * argv[1], when given, multiplies the work (a known ratio for `perflab compare`).
 */
#include <stdlib.h>
/* the experiments measure this frame as the paper laid it out: no valgrind client request in it */
#define PERFLAB_PROBE_NO_VALGRIND
#include "perflab_probe.h"

unsigned lo_a(unsigned n, unsigned x);
unsigned lo_b(unsigned n, unsigned x);
unsigned lo_c(unsigned n, unsigned x);

unsigned lo_drive(unsigned rounds, unsigned x);

static volatile unsigned seed = 12345; /* not a constant: nothing may be folded */

/* The driver lives in .text with the hot loops: gcc puts main itself in
 * .text.startup, where the link order would not move it. */
__attribute__((noinline)) unsigned lo_drive(unsigned rounds, unsigned x)
{
    for (unsigned r = 0; r < rounds; r++) {
        x = lo_a(700, x);
        x = lo_b(700, x);
        x = lo_c(700, x);
    }
    return x;
}

int main(int argc, char **argv)
{
    unsigned rounds = 400u * (argc > 1 ? (unsigned)atoi(argv[1]) : 1u);
    unsigned x = seed;

    PERFLAB_PROBE_BEGIN();
    x = lo_drive(rounds, x);
    PERFLAB_PROBE_END();
    return x == 0xdeadbeef; /* uses x, exits 0 in practice */
}
