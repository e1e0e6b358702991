/* Twelve identical functions at twelve placements: how much the address alone changes a time.
 *
 * Each twin is the tests' and spin's tight loop (one turn per iteration, its body kept by the
 * empty asm). The first eight sit in a page of their own each, at their own cache line (a
 * different L1i set) and their own 8-byte offset within that line. The last four share one
 * page, packed as a library's functions are (one right after another, or a line or two
 * apart): a CPU whose fetch windows, op cache or branch predictors see neighbouring code (a
 * Zen 5 guest ran two such twins 1.24-1.65x apart where the first eight spanned 8.5 %) shows
 * it there. perflab builds this with -falign-functions=1 and
 * -fno-toplevel-reorder, so each twin starts exactly where its directive puts it, and with the
 * compiler's own loop alignment, so its loop is padded as in any compiled code. Offsets stay
 * at or below 40: the loop (12 bytes, aligned to 8 or 16) then ends inside its line. A loop
 * split across two lines runs at half speed on some CPUs (a defect of that code's layout which
 * loop alignment exists to avoid), which no allowance for placement could or should absorb.
 */
#include <stdint.h>

#define PLACE(bytes) __asm__(".text\n.p2align 12\n.skip " #bytes "\n")
#define TWIN(name)                                \
    void name(void)                               \
    {                                             \
        for (uint64_t i = 0; i < 1000; i++)       \
            __asm__ volatile("" : "+r"(i));       \
    }

/* page-aligned + 64 * line + offset */
__asm__(".text\n.p2align 12\n");
TWIN(placed_0)
PLACE(328); /* line 5, offset 8 */
TWIN(placed_1)
PLACE(656); /* line 10, offset 16 */
TWIN(placed_2)
PLACE(1368); /* line 21, offset 24 */
TWIN(placed_3)
PLACE(2208); /* line 34, offset 32 */
TWIN(placed_4)
PLACE(3048); /* line 47, offset 40 */
TWIN(placed_5)
PLACE(3720); /* line 58, offset 8 */
TWIN(placed_6)
PLACE(4056); /* line 63, offset 24 */
TWIN(placed_7)
__asm__(".text\n.p2align 12\n");
TWIN(placed_8)
__asm__(".text\n.p2align 6\n.skip 88\n"); /* a line on, offset 24: as the suite's twins sit */
TWIN(placed_9)
TWIN(placed_10) /* right after the one before, no alignment */
__asm__(".text\n.p2align 6\n.skip 40\n");
TWIN(placed_11)
