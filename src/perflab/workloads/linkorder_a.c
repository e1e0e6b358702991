/* Hot loop A: a serial xorshift chain, two-byte-shorter than its neighbours. */

/* Cold code ahead of the loop: its size shifts lo_a by a non-multiple of 64. */
unsigned lo_a_cold(unsigned x)
{
    return x * 2654435761u + (x >> 7);
}

unsigned lo_a(unsigned n, unsigned x)
{
    for (unsigned i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
    }
    return x;
}
