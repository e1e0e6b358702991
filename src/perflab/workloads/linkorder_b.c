/* Hot loop B: a data-dependent branch inside the loop (taken about half the time). */

unsigned lo_b_cold(unsigned x, unsigned y)
{
    return (x | y) * 40503u - (x & 0xff) + (y >> 3) * 7u;
}

unsigned lo_b(unsigned n, unsigned x)
{
    unsigned acc = 0;

    for (unsigned i = 0; i < n; i++) {
        x = x * 1103515245u + 12345u;
        if (x & 0x10000)
            acc += x >> 9;
        else
            acc ^= x;
    }
    return x ^ acc;
}
