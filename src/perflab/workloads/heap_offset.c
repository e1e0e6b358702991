/* Preloaded by `perflab compare --randomize heap-offset`: moves the start of the heap.
 *
 * PERFLAB_HEAP_OFFSET holds a number of bytes as fixed-width decimal (every setup's
 * environment is then as long: the environment's size is a dimension of its own).  This
 * constructor runs before main and before the program's first malloc, so sbrk() of that many
 * bytes moves everything malloc later takes from the brk heap by them, rounded up to malloc's
 * alignment (16 bytes with glibc on 64-bit targets).  Allocations malloc maps with mmap (large
 * ones) do not move.  The variable is left in place, so the environment the program sees is
 * the one perflab planned, and the program's own children shift their heaps alike.
 */
#define _DEFAULT_SOURCE
#include <stdlib.h>
#include <unistd.h>

__attribute__((constructor)) static void perflab_heap_offset(void)
{
    const char *text = getenv("PERFLAB_HEAP_OFFSET");
    char *end;
    long bytes;

    if (!text)
        return;
    bytes = strtol(text, &end, 10);
    if (*end == '\0' && bytes > 0)
        sbrk(bytes);
}
