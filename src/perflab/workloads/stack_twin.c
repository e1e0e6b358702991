/* A twin of a built-in loop that says where its stack landed instead of timing the loop.
 *
 * perflab puts the loop's own source (mytkowicz.c by default) in place of the #include
 * at the end, and PERFLAB_TWIN_G names its counter g; the probe's BEGIN becomes a report
 * of main's frame, the slots g and inc, the statics i, j, k, the environment array and
 * the AT_EXECFN string, one line on stdout, then an exit.  The startup code before main
 * is the same libc's, so main's frame sits where the loop binary's does for the same
 * exec strings: perflab reads the frame from the twin and the loop's slot offsets and
 * statics from the loop binary itself.
 */
#include <stdio.h>
#include <unistd.h>
#include <sys/auxv.h>

#define PERFLAB_PROBE_H /* keep the real probe out: this twin reports, it does not time */

extern char **environ;

static void perflab_stack_report(void *frame, int *g, int *inc, int *i, int *j, int *k)
{
    size_t envc = 0;

    while (environ[envc])
        envc++;
    printf("frame=%p g=%p inc=%p i=%p j=%p k=%p environ=%p execfn=%p envc=%zu\n", frame,
           (void *)g, (void *)inc, (void *)i, (void *)j, (void *)k, (void *)environ,
           (void *)getauxval(AT_EXECFN), envc);
    fflush(stdout);
    _exit(0);
}

#ifndef PERFLAB_TWIN_G
#define PERFLAB_TWIN_G g
#endif
#define PERFLAB_PROBE_BEGIN() \
    perflab_stack_report(__builtin_frame_address(0), (int *)&PERFLAB_TWIN_G, &inc, &statics.i, \
                         &statics.j, &statics.k)
#define PERFLAB_PROBE_END() ((void)0)

#include "mytkowicz.c"
