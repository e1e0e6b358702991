/* A bias that shows on every CPU: the paper's loop with its counter g an 8-byte value
 * at 12 bytes into a 16-byte-aligned slot on main's stack.  The env size moves the stack in
 * 16-byte steps, so once every 4096 bytes of environment g straddles a page boundary
 * and each of its loads and stores is split across two pages (two TLB lookups, two
 * cache lines), which costs on any x86-64 core, whatever it does about 4K aliasing.
 */
#include <stdint.h>
/* the experiments measure this frame as the paper laid it out: no valgrind client request in it */
#define PERFLAB_PROBE_NO_VALGRIND
#include "perflab_probe.h"
#include "perflab_layout.h"

static volatile int one = 1; /* not a constant: the compiler may not fold the loop */

struct split {
    uint32_t pad[3]; /* g at 12 mod 16: 8 bytes there can straddle a page; at 4 they cannot */
    uint64_t g;
} __attribute__((packed, aligned(16)));

int main(void)
{
    struct split s = {{0, 0, 0}, 0};
    int inc = one;

    PERFLAB_LOOP_ALIGN();
    PERFLAB_PROBE_BEGIN();
    for (; s.g < 65536; s.g++) {
        statics.i += inc;
        statics.j += inc;
        statics.k += inc;
    }
    PERFLAB_PROBE_END();
    return (statics.i + statics.j + statics.k) == 3 * 65536 ? 0 : 1;
}
