/* A hashing loop (FNV-1a over the words): the second hot function. */
unsigned long mix(const int *v, long n)
{
    unsigned long h = 1469598103934665603UL;
    for (long i = 0; i < n; i++)
        h = (h ^ (unsigned)v[i]) * 1099511628211UL;
    return h;
}
