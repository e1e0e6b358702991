/* Hot loop C: a short multiply-add recurrence, the smallest loop body of the three. */

static unsigned lo_c_table[4] = {3, 5, 7, 11};

unsigned lo_c(unsigned n, unsigned x)
{
    for (unsigned i = 0; i < n; i++)
        x = x * lo_c_table[i & 3] + i;
    return x;
}

unsigned lo_c_cold(unsigned x)
{
    return x % 1000003u + lo_c_table[x & 3];
}
