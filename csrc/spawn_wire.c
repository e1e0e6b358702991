/* A batch request's bytes (struct perflab_batch and what follows it) checked and unpacked. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "spawn_internal.h"

void batch_free(struct batch *b)
{
    if (b->argv)
        for (int i = 0; i < b->hdr.nprogs; i++)
            free(b->argv[i]);
    free(b->argv);
    free(b->dirs);
    free(b->cpus);
    free(b->prog);
    free(b->sizes);
    free(b->envp);
    free(b->pad);
}

/* The next NUL-terminated string at *at, or NULL if the bytes end first. */
static char *next_string(char **at, const char *end)
{
    char *s = *at, *nul = s < end ? memchr(s, '\0', (size_t)(end - s)) : NULL;

    if (!nul)
        return NULL;
    *at = nul + 1;
    return s;
}

static void *take(const char **at, const char *end, size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);

    if (p && (size_t)(end - *at) >= bytes) {
        memcpy(p, *at, bytes);
        *at += bytes;
        return p;
    }
    free(p);
    return NULL;
}

int batch_parse(const void *req, size_t len, struct batch *b)
{
    const char *at = req, *end = at + len;
    const struct perflab_batch *h = req;
    int32_t *argc = NULL;
    int64_t max = -1;
    char *s, *strings;

    memset(b, 0, sizeof *b);
    if (len < sizeof *h || h->magic != PERFLAB_BATCH_MAGIC || h->version != PERFLAB_BATCH_VERSION)
        return -EPROTO;
    b->hdr = *h;
    at += sizeof *h;
    if (h->iterations < 1 || h->iterations > PERFLAB_MAX_ITERATIONS)
        return -EINVAL;
    if (h->ncpus < 0 || h->nprogs < 1 || h->nenv < 0 || h->nruns < 0 || h->ncpus > (1 << 20) ||
        h->nprogs > (1 << 20) || h->nenv > (1 << 24) || h->nruns > (1 << 26))
        return -EINVAL;
    if (!(b->cpus = take(&at, end, (size_t)h->ncpus * 4)) ||
        !(argc = take(&at, end, (size_t)h->nprogs * 4)) ||
        !(b->prog = take(&at, end, (size_t)h->nruns * 4)) ||
        !(b->sizes = take(&at, end, (size_t)h->nruns * 8)) ||
        (uint64_t)(end - at) != h->strings_len || !(b->argv = calloc((size_t)h->nprogs, sizeof *b->argv)) ||
        !(b->envp = calloc((size_t)h->nenv + 2, sizeof *b->envp)))
        goto bad;
    strings = (char *)at;
    if ((h->flags & PERFLAB_SPAWN_DIRS) && !(b->dirs = calloc((size_t)h->nprogs, sizeof *b->dirs)))
        goto bad;
    for (int p = 0; p < h->nprogs; p++) {
        if (b->dirs && !(b->dirs[p] = next_string(&strings, end)))
            goto bad;
        if (argc[p] < 1 || argc[p] > (1 << 20) || !(b->argv[p] = calloc((size_t)argc[p] + 2, sizeof(char *))))
            goto bad;
        for (int i = 0; i <= argc[p]; i++)
            if (!(b->argv[p][i] = next_string(&strings, end)))
                goto bad;
    }
    for (int i = 0; i < h->nenv; i++)
        if (!(b->envp[i] = next_string(&strings, end)))
            goto bad;
    if (!(s = next_string(&strings, end)) || strings != end)
        goto bad;
    for (int i = 0; i < h->ncpus; i++)
        if (b->cpus[i] < 0)
            goto bad;
    for (int i = 0; i < h->nruns; i++) {
        if (b->prog[i] < 0 || b->prog[i] >= h->nprogs || b->sizes[i] < -1)
            goto bad;
        max = b->sizes[i] > max ? b->sizes[i] : max;
    }
    if (max >= 0) {
        b->prefix = strlen(s) + 1;
        if (b->prefix == 1 || strchr(s, '=') || !(b->pad = malloc(b->prefix + (size_t)max + 1)))
            goto bad;
        memcpy(b->pad, s, b->prefix - 1);
        b->pad[b->prefix - 1] = '=';
        memset(b->pad + b->prefix, 'a', (size_t)max);
        b->pad[b->prefix + max] = '\0';
    }
    free(argc);
    return 0;
bad:
    free(argc);
    batch_free(b);
    return -EINVAL;
}
