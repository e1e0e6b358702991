/* What the spawner helper's two modes share: whole messages on its socket (wire.c), and the
 * supervising mode main.c hands over to (supervise.c). */
#ifndef PERFLAB_SPAWNER_WIRE_H
#define PERFLAB_SPAWNER_WIRE_H

#include <stddef.h>
#include <sys/types.h>

int read_full(int fd, void *buf, size_t n);
int write_full(int fd, const void *buf, size_t n);
int supervise(int sock, pid_t perflab, const char *tmp_parent);

#endif
