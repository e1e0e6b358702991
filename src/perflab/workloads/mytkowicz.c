/* The loop of Mytkowicz et al. (ASPLOS 2009), as DjiBee's post reproduced it,
 * with perflab's probe around the loop instead of PAPI.
 *
 * g and inc live on main's stack, i, j and k in .bss: at -O0 every iteration
 * loads and stores both, and how the stack addresses alias the statics moves
 * with the size of the environment above the stack.  Where the loop's code and
 * its statics sit is fixed by perflab_layout.h and its flags, so that nothing
 * else in the binary moves them.
 */
/* the experiments measure this frame as the paper laid it out: no valgrind client request in it */
#define PERFLAB_PROBE_NO_VALGRIND
#include "perflab_probe.h"
#include "perflab_layout.h"

static volatile int one = 1; /* not a constant: the compiler may not fold the loop */

int main(void)
{
    int g = 0, inc = one;

    PERFLAB_LOOP_ALIGN();
    PERFLAB_PROBE_BEGIN();
    for (; g < 65536; g++) {
        statics.i += inc;
        statics.j += inc;
        statics.k += inc;
    }
    PERFLAB_PROBE_END();
    return (statics.i + statics.j + statics.k) == 3 * 65536 ? 0 : 1;
}
