/* Where a built-in loop's code and statics sit, fixed by the source and its flags, not by what
 * the probe, the C library or the linker happen to put before them.
 *
 *     PERFLAB_LOOP_CODE     the loop's first instruction's offset in its 64-byte window (0-63)
 *     PERFLAB_LOOP_STATICS  the static counter i's offset in its page (a multiple of 4);
 *                           j and k follow it, 4 and 8 bytes on
 *
 * The statics are members of one page-aligned object, named i, j and k in the symbol table so
 * that a disassembly names them.  PERFLAB_LOOP_ALIGN() goes just before PERFLAB_PROBE_BEGIN(),
 * outside the timed region: it pads main's code from a 64-byte boundary so that the loop
 * after the probe's call (5 bytes) and the jump to the loop's test (2 bytes, gcc at -O0)
 * begins PERFLAB_LOOP_CODE bytes into a window.  perflab reads both back from the binary it
 * runs (lab/env_size/loop_layouts.py), and a test holds them.
 */
#ifndef PERFLAB_LAYOUT_H
#define PERFLAB_LAYOUT_H

#ifndef PERFLAB_LOOP_CODE
#define PERFLAB_LOOP_CODE 0
#endif
#ifndef PERFLAB_LOOP_STATICS
#define PERFLAB_LOOP_STATICS 0x300
#endif
#define PERFLAB_LOOP_LEAD 7 /* call perflab_probe_begin; jmp to the loop's test */

#define PERFLAB_LAYOUT_STR_(x) #x
#define PERFLAB_LAYOUT_STR(x) PERFLAB_LAYOUT_STR_(x)

struct perflab_statics {
    char before[PERFLAB_LOOP_STATICS];
    int i, j, k;
};

static struct perflab_statics statics __attribute__((aligned(4096)));
__asm__(".set i, statics+" PERFLAB_LAYOUT_STR(PERFLAB_LOOP_STATICS) "\n\t"
        ".set j, i+4\n\t"
        ".set k, i+8");

#define PERFLAB_LOOP_ALIGN()                                                                     \
    __asm__ volatile(".p2align 6\n\t.skip %c0, 0x90" ::"i"(                                     \
        (PERFLAB_LOOP_CODE - PERFLAB_LOOP_LEAD) & 63))
#endif
