/* A summing loop: the hot code whose address the link order moves. */
long sum(const int *v, long n)
{
    long s = 0;
    for (long i = 0; i < n; i++)
        s += v[i] * (i & 7);
    return s;
}
