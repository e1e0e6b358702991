/* The loop of Mytkowicz et al. (ASPLOS 2009), as DjiBee's post reproduced it,
 * with perflab's probe around the loop instead of PAPI.
 *
 * g and inc live on main's stack, i, j and k in .bss: at -O0 every iteration
 * loads and stores both, and how the stack addresses alias the statics moves
 * with the size of the environment above the stack.
 */
/* the experiments measure this frame as the paper laid it out: no valgrind client request in it */
#define PERFLAB_PROBE_NO_VALGRIND
#include "perflab_probe.h"

static int i = 0, j = 0, k = 0;
static volatile int one = 1; /* not a constant: the compiler may not fold the loop */

int main(void)
{
    int g = 0, inc = one;

    PERFLAB_PROBE_BEGIN();
    for (; g < 65536; g++) {
        i += inc;
        j += inc;
        k += inc;
    }
    PERFLAB_PROBE_END();
    return (i + j + k) == 3 * 65536 ? 0 : 1;
}
