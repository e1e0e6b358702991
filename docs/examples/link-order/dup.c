/* A second main: linked with bench.o, the link fails (the error sample of docs/link-order.md). */
int main(void)
{
    return 0;
}
