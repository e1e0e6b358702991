/* main and the driver: each round sums and hashes the same 4096 words; argv[1] scales the
 * rounds (2 does twice the work). Its exit status depends on the results, so -O1 keeps them. */
#include <stdlib.h>

long sum(const int *v, long n);
unsigned long mix(const int *v, long n);

static int words[4096];

static unsigned long run(long rounds)
{
    unsigned long acc = 0;
    for (long r = 0; r < rounds; r++)
        acc += (unsigned long)sum(words, 4096) ^ mix(words, 4096);
    return acc;
}

int main(int argc, char **argv)
{
    long scale = argc > 1 ? atol(argv[1]) : 1;
    for (int i = 0; i < 4096; i++)
        words[i] = i * 2654435761u;
    return (int)(run(400 * scale) & 1);
}
