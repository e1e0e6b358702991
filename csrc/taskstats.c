/* perflab's one taskstats client over generic netlink (see taskstats.h): the family, queries
 * for one pid or thread group, and a listener's registration and exit records. */
#define _GNU_SOURCE
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>
#include <linux/genetlink.h>
#include "perflab.h"
#include "perflab_internal.h"
#include "taskstats.h"

#define TS_REGISTER_TIMEOUT_S 2
#define TS_RCVBUF (16 << 20) /* a listener hears every exit on the machine */
#define TS_VERSION_TGID 11   /* ac_tgid arrived in version 11 */

struct ts_msg {
    struct nlmsghdr n;
    struct genlmsghdr g;
    char attrs[64];
};

static int ts_send(struct ts_client *c, uint16_t type, uint8_t cmd, uint16_t flags,
                   uint16_t attr, const void *val, uint16_t len)
{
    struct ts_msg m;
    struct nlattr *a = (struct nlattr *)m.attrs;

    if ((size_t)NLA_HDRLEN + len > sizeof m.attrs)
        return -EINVAL;
    memset(&m, 0, sizeof m);
    a->nla_type = attr;
    a->nla_len = (uint16_t)(NLA_HDRLEN + len);
    memcpy((char *)a + NLA_HDRLEN, val, len);
    m.n.nlmsg_len = (uint32_t)(NLMSG_LENGTH(GENL_HDRLEN) + NLA_ALIGN(a->nla_len));
    m.n.nlmsg_type = type;
    m.n.nlmsg_flags = (uint16_t)(NLM_F_REQUEST | flags);
    m.n.nlmsg_seq = ++c->seq;
    m.g.cmd = cmd;
    m.g.version = 1;
    return send(c->sock, &m, m.n.nlmsg_len, 0) < 0 ? -errno : 0;
}

/* The first attribute of `type` among [at, end), or NULL. */
static struct nlattr *nla_find(char *at, char *end, uint16_t type)
{
    while (at + NLA_HDRLEN <= end) {
        struct nlattr *a = (struct nlattr *)at;
        if (a->nla_len < NLA_HDRLEN || at + a->nla_len > end)
            return NULL;
        if ((a->nla_type & NLA_TYPE_MASK) == type)
            return a;
        at += NLA_ALIGN(a->nla_len);
    }
    return NULL;
}

/* The attributes of the reply to our last request (skipping stale ones; an ack has none,
 * [at, end) empty), or -errno. */
static int ts_reply(struct ts_client *c, char *buf, size_t size, char **attrs, char **end)
{
    for (;;) {
        ssize_t n = recv(c->sock, buf, size, 0);
        struct nlmsghdr *h = (struct nlmsghdr *)buf;
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -errno;
        if (!NLMSG_OK(h, (size_t)n) || h->nlmsg_seq != c->seq)
            continue;
        if (h->nlmsg_type == NLMSG_ERROR) {
            struct nlmsgerr *e = NLMSG_DATA(h);
            *attrs = *end = buf;
            return e->error;
        }
        *attrs = (char *)NLMSG_DATA(h) + GENL_HDRLEN;
        *end = (char *)h + h->nlmsg_len;
        return *attrs <= *end ? 0 : -EPROTO;
    }
}

static int ts_family(struct ts_client *c)
{
    char buf[4096], *at, *end;
    struct nlattr *id;
    int rc = ts_send(c, GENL_ID_CTRL, CTRL_CMD_GETFAMILY, 0, CTRL_ATTR_FAMILY_NAME,
                     TASKSTATS_GENL_NAME, sizeof TASKSTATS_GENL_NAME);

    if (rc || (rc = ts_reply(c, buf, sizeof buf, &at, &end)))
        return rc;
    if (!(id = nla_find(at, end, CTRL_ATTR_FAMILY_ID)))
        return -ENOENT;
    memcpy(&c->family, (char *)id + NLA_HDRLEN, sizeof c->family);
    return 0;
}

int ts_client_open(struct ts_client *c, int timeout_s)
{
    struct timeval tv = {timeout_s, 0};
    struct sockaddr_nl addr = {.nl_family = AF_NETLINK};
    int rc;

    c->seq = 0;
    c->sock = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_GENERIC);
    if (c->sock < 0)
        return -errno;
    if (bind(c->sock, (struct sockaddr *)&addr, sizeof addr) != 0 ||
        setsockopt(c->sock, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) != 0)
        rc = -errno;
    else
        rc = ts_family(c);
    if (rc)
        ts_client_close(c);
    return rc;
}

void ts_client_close(struct ts_client *c)
{
    if (c->sock >= 0)
        close(c->sock);
    c->sock = -1;
}

/* A struct taskstats of any kernel's length into this header's: an older kernel's is shorter
 * (the rest zero), a newer one's longer (the rest dropped). */
static void ts_copy(struct taskstats *ts, const struct nlattr *stats)
{
    size_t len = stats->nla_len - NLA_HDRLEN;
    memset(ts, 0, sizeof *ts);
    memcpy(ts, (const char *)stats + NLA_HDRLEN, len < sizeof *ts ? len : sizeof *ts);
}

/* The TASKSTATS_TYPE_STATS inside the first `aggr` attribute of [at, end), or NULL. */
static struct nlattr *ts_stats(char *at, char *end, uint16_t aggr)
{
    struct nlattr *outer = nla_find(at, end, aggr);
    if (!outer)
        return NULL;
    return nla_find((char *)outer + NLA_HDRLEN, (char *)outer + outer->nla_len,
                    TASKSTATS_TYPE_STATS);
}

int ts_client_query(struct ts_client *c, uint16_t attr, pid_t pid, struct taskstats *ts)
{
    char buf[4096], *at, *end;
    uint32_t id = (uint32_t)pid;
    uint16_t aggr = attr == TASKSTATS_CMD_ATTR_PID ? TASKSTATS_TYPE_AGGR_PID
                                                   : TASKSTATS_TYPE_AGGR_TGID;
    struct nlattr *stats;
    int rc = ts_send(c, c->family, TASKSTATS_CMD_GET, 0, attr, &id, sizeof id);

    if (rc || (rc = ts_reply(c, buf, sizeof buf, &at, &end)))
        return rc;
    if (!(stats = ts_stats(at, end, aggr)))
        return -EPROTO;
    ts_copy(ts, stats);
    return 0;
}

int ts_client_register(struct ts_client *c, const char *cpumask)
{
    char buf[4096], *at, *end;
    size_t len = strlen(cpumask) + 1;
    int rc;

    if (len > 48)
        return -EINVAL;
    rc = ts_send(c, c->family, TASKSTATS_CMD_GET, NLM_F_ACK,
                 TASKSTATS_CMD_ATTR_REGISTER_CPUMASK, cpumask, (uint16_t)len);
    return rc ? rc : ts_reply(c, buf, sizeof buf, &at, &end);
}

int perflab_taskstats_listen(const char *cpumask)
{
    struct ts_client c;
    int big = TS_RCVBUF, rc = ts_client_open(&c, TS_REGISTER_TIMEOUT_S);

    if (rc)
        return rc;
    /* without CAP_NET_ADMIN the default buffer has to do */
    setsockopt(c.sock, SOL_SOCKET, SO_RCVBUFFORCE, &big, sizeof big);
    if ((rc = ts_client_register(&c, cpumask))) {
        ts_client_close(&c);
        return rc;
    }
    return c.sock;
}

/* One thread's exit record read at read_ns, or 0 when its kernel's struct lacks ac_tgid. */
static int ts_record(const struct nlattr *stats, int64_t read_ns, struct perflab_exit_record *r)
{
    struct taskstats ts;

    ts_copy(&ts, stats);
    if (ts.version < TS_VERSION_TGID)
        return 0;
    r->tgid = (int32_t)ts.ac_tgid;
    r->tid = (int32_t)ts.ac_pid;
    r->ppid = (int32_t)ts.ac_ppid;
    memcpy(r->comm, ts.ac_comm, sizeof r->comm);
    r->comm[sizeof r->comm - 1] = '\0';
    r->etime_us = ts.ac_etime;
    r->utime_us = ts.ac_utime;
    r->stime_us = ts.ac_stime;
    r->vcsw = ts.nvcsw;
    r->ivcsw = ts.nivcsw;
    r->cpu_delay_ns = ts.cpu_delay_total;
    r->cpu_ns = ts.cpu_run_virtual_total;
    r->read_ns = read_ns;
    return 1;
}

int perflab_taskstats_read(int fd, struct perflab_exit_record *out, int max, int *lost)
{
    char buf[65536];
    int n = 0;

    while (n < max) {
        ssize_t got = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
        int64_t now = (int64_t)perflab_now_ns(CLOCK_MONOTONIC);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0 && errno == ENOBUFS) { /* the kernel dropped records; the socket goes on */
            *lost = 1;
            continue;
        }
        if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            break;
        if (got < 0)
            return n ? n : -errno;
        for (struct nlmsghdr *h = (struct nlmsghdr *)buf; NLMSG_OK(h, (size_t)got) && n < max;
             h = NLMSG_NEXT(h, got)) {
            char *at = (char *)NLMSG_DATA(h) + GENL_HDRLEN, *end = (char *)h + h->nlmsg_len;
            struct nlattr *stats;
            if (h->nlmsg_type == NLMSG_ERROR || at > end)
                continue;
            /* a thread's record (AGGR_PID); a process's summary (AGGR_TGID) is not used */
            if ((stats = ts_stats(at, end, TASKSTATS_TYPE_AGGR_PID)))
                n += ts_record(stats, now, &out[n]);
        }
    }
    return n;
}
