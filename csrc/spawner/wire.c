/* Whole messages on the helper's socket, for both its modes (main.c and supervise.c). */
#define _GNU_SOURCE
#include <errno.h>
#include <sys/socket.h>
#include <unistd.h>
#include "wire.h"

int read_full(int fd, void *buf, size_t n)
{
    for (size_t got = 0; got < n;) {
        ssize_t r = read(fd, (char *)buf + got, n - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        got += (size_t)r;
    }
    return 0;
}

int write_full(int fd, const void *buf, size_t n)
{
    for (size_t put = 0; put < n;) {
        ssize_t r = send(fd, (const char *)buf + put, n - put, MSG_NOSIGNAL);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        put += (size_t)r;
    }
    return 0;
}
