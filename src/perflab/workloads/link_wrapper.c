/* The compiler wrapper `perflab compare --build-cmd-a/-b` puts first on PATH, as ldrand does.
 *
 * Installed under the drivers' names (cc, gcc, clang, ...) in the directory
 * PERFLAB_LINK_WRAPPERS, it runs the program of its own name found next on PATH, with the
 * arguments it was given, unless the call links PERFLAB_LINK_TARGET (no -c, -S, -E, -M or
 * -MM; the output named by -o, else a.out).  That link gets the padding object
 * PERFLAB_LINK_PAD (if set) before its first object file, and its object files (arguments
 * ending in .o) in the order PERFLAB_LINK_ORDER names them (file names without .o, comma
 * separated; an object it does not name keeps its place after those it does).  The link is
 * written to PERFLAB_LINK_LOG: the target, then the objects as linked, the padding left out,
 * one path a line.  PERFLAB_LINK_FLAGS (one argument a line) is appended to that link: the
 * linker and the seed that place its functions.  Every compile (-c) gets the arguments
 * PERFLAB_COMPILE_FLAGS names (one a line: -ffunction-sections, so that a link can move
 * each function).  A driver a driver runs (gcc calling another gcc) passes through:
 * PERFLAB_LINK_DONE is set.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *base(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

/* The next executable called `name` on PATH, outside the wrappers' own directory. */
static char *next_on_path(const char *name, const char *ours)
{
    char *path = strdup(getenv("PATH") ? getenv("PATH") : ""), *save = NULL, own[PATH_MAX];
    static char found[PATH_MAX];

    if (!path)
        return NULL;
    if (!ours || !realpath(ours, own))
        own[0] = '\0';
    for (char *dir = strtok_r(path, ":", &save); dir; dir = strtok_r(NULL, ":", &save)) {
        char real[PATH_MAX];
        if (realpath(*dir ? dir : ".", real) && strcmp(real, own) == 0)
            continue;
        snprintf(found, sizeof found, "%s/%s", *dir ? dir : ".", name);
        if (access(found, X_OK) == 0) {
            free(path);
            return found;
        }
    }
    free(path);
    return NULL;
}

static int is_link(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "-c") || !strcmp(argv[i], "-S") || !strcmp(argv[i], "-E") ||
            !strcmp(argv[i], "-M") || !strcmp(argv[i], "-MM"))
            return 0;
    return 1;
}

/* Whether the output of this link is `target` (an absolute path whose directory is real). */
static int links_target(int argc, char **argv, const char *target)
{
    const char *out = "a.out";
    char dir[PATH_MAX], real[PATH_MAX], full[2 * PATH_MAX], *slash;

    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-o") && i + 1 < argc)
            out = argv[++i];
        else if (!strncmp(argv[i], "-o", 2) && argv[i][2])
            out = argv[i] + 2;
    }
    snprintf(dir, sizeof dir, "%s", out);
    slash = strrchr(dir, '/');
    if (slash)
        slash[1] = '\0'; /* "dir/", or "/" for a file in the root */
    if (!realpath(slash ? dir : ".", real))
        return 0;
    snprintf(full, sizeof full, "%s%s%s", real, strcmp(real, "/") ? "/" : "", base(out));
    return strcmp(full, target) == 0;
}

static int is_compile(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "-c"))
            return 1;
    return 0;
}

/* How many lines `text` holds (a last one without a newline counts). */
static int lines(const char *text)
{
    int n = 0;
    for (const char *p = text; p && *p; p++)
        n += *p == '\n' || !p[1];
    return n;
}

/* argv with the lines of `text` appended (a copy: the environment's string stays). */
static char **appended(char **argv, const char *text)
{
    int argc = 0, n = lines(text);
    char *copy = strdup(text ? text : ""), *save = NULL, **out;

    while (argv[argc])
        argc++;
    out = calloc((size_t)argc + (size_t)n + 1, sizeof *out);
    if (!out || !copy)
        return NULL;
    memcpy(out, argv, (size_t)argc * sizeof *out);
    for (char *line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
        out[argc++] = line;
    out[argc] = NULL;
    return out;
}

static int is_object(char **argv, int i)
{
    size_t n = strlen(argv[i]);
    return argv[i][0] != '-' && n > 2 && !strcmp(argv[i] + n - 2, ".o") &&
           !(i > 1 && !strcmp(argv[i - 1], "-o"));
}

/* The rank of an object in PERFLAB_LINK_ORDER: its place there, else after every named one. */
static long rank(const char *object, const char *order)
{
    const char *name = base(object);
    size_t n = strlen(name) - 2;
    long at = 0;

    for (const char *p = order; p && *p; at++) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        if (len == n && !strncmp(p, name, n))
            return at;
        p = comma ? comma + 1 : p + len;
    }
    return LONG_MAX;
}

/* argv with its objects in PERFLAB_LINK_ORDER's order and the padding before the first. */
static void reorder(int argc, char **argv, char **out, const char *order, const char *pad)
{
    int slots[argc], nobj = 0, k = 0;
    char *objects[argc];

    for (int i = 1; i < argc; i++)
        if (is_object(argv, i)) {
            slots[nobj] = i;
            objects[nobj++] = argv[i];
        }
    for (int i = 1; i < nobj; i++) /* stable insertion sort by rank */
        for (int j = i; j > 0 && rank(objects[j - 1], order) > rank(objects[j], order); j--) {
            char *t = objects[j];
            objects[j] = objects[j - 1];
            objects[j - 1] = t;
        }
    out[k++] = argv[0];
    for (int i = 1, o = 0; i < argc; i++) {
        if (o < nobj && slots[o] == i) {
            if (o == 0 && pad && *pad)
                out[k++] = (char *)pad;
            out[k++] = objects[o++];
        } else {
            out[k++] = argv[i];
        }
    }
    out[k] = NULL;
}

/* The target, then the objects of the link as it will run, padding left out, a line each. */
static int write_log(const char *log, const char *target, char **argv, const char *pad)
{
    FILE *f = fopen(log, "w");
    char real[PATH_MAX];

    if (!f)
        return -1;
    fprintf(f, "%s\n", target);
    for (int i = 1; argv[i]; i++)
        if (is_object(argv, i) && !(pad && !strcmp(argv[i], pad)))
            fprintf(f, "%s\n", realpath(argv[i], real) ? real : argv[i]);
    return fclose(f);
}

int main(int argc, char **argv)
{
    const char *name = base(argv[0]), *target = getenv("PERFLAB_LINK_TARGET");
    const char *pad = getenv("PERFLAB_LINK_PAD"), *log = getenv("PERFLAB_LINK_LOG");
    char *real = next_on_path(name, getenv("PERFLAB_LINK_WRAPPERS"));
    char **args = argv;

    if (!real) {
        fprintf(stderr, "perflab link wrapper: %s: not found on PATH\n", name);
        return 127;
    }
    if (target && *target && !getenv("PERFLAB_LINK_DONE") && is_link(argc, argv) &&
        links_target(argc, argv, target)) {
        args = calloc((size_t)argc + 2, sizeof *args);
        if (!args)
            return 127;
        reorder(argc, argv, args, getenv("PERFLAB_LINK_ORDER"), pad);
        if (log && write_log(log, target, args, pad) != 0) {
            fprintf(stderr, "perflab link wrapper: %s: %s\n", log, strerror(errno));
            return 127;
        }
        setenv("PERFLAB_LINK_DONE", "1", 1);
        if (getenv("PERFLAB_LINK_FLAGS") && *getenv("PERFLAB_LINK_FLAGS") &&
            !(args = appended(args, getenv("PERFLAB_LINK_FLAGS"))))
            return 127;
    } else if (!getenv("PERFLAB_LINK_DONE") && getenv("PERFLAB_COMPILE_FLAGS") &&
               *getenv("PERFLAB_COMPILE_FLAGS") && is_compile(argc, argv)) {
        if (!(args = appended(argv, getenv("PERFLAB_COMPILE_FLAGS"))))
            return 127;
    }
    args[0] = real; /* gcc finds its own files (the LTO plugin) from where argv[0] says it is */
    execv(real, args);
    fprintf(stderr, "perflab link wrapper: %s: %s\n", real, strerror(errno));
    return 127;
}
