/* The padding object `perflab compare --randomize code-offset` links first: PERFLAB_CODE_OFFSET
 * bytes of .text that nothing calls, so all the code linked after it (every object of the
 * program, then the libraries linked statically) moves by that many bytes, rounded up to the
 * alignment of the next object's .text (16 bytes for gcc -O2 functions on x86-64, 1 at -O0).
 * The padding itself starts on a 64-byte boundary, so two offsets always differ by the same
 * amount whatever the startup code before it ends on.
 */
#define PERFLAB_STR2(x) #x
#define PERFLAB_STR(x) PERFLAB_STR2(x)

#if PERFLAB_CODE_OFFSET > 0
__asm__(".pushsection .text\n\t.p2align 6\n\t.skip " PERFLAB_STR(PERFLAB_CODE_OFFSET)
        "\n\t.popsection");
#else
__asm__(".pushsection .text\n\t.p2align 6\n\t.popsection");
#endif
