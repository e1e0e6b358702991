/* Brotli's own encoder in perflab's repeat loop: the input read into memory once, then each
 * iteration compresses all of it at the quality given, as the brotli tool's -q does.
 *
 *     brotli-loop QUALITY INPUT
 *
 * Prints the compressed size and the iterations run (one outside perflab). */
#include <stdio.h>
#include <stdlib.h>
#include <brotli/encode.h>
#include "perflab_probe.h"

int main(int argc, char **argv)
{
    FILE *f;
    long size;
    uint8_t *in, *out;
    size_t got = 0, room;
    int quality, iterations = 0;

    if (argc != 3 || (quality = atoi(argv[1])) < 0 || quality > 11) {
        fprintf(stderr, "usage: brotli-loop QUALITY(0-11) INPUT\n");
        return 2;
    }
    if (!(f = fopen(argv[2], "rb")) || fseek(f, 0, SEEK_END) || (size = ftell(f)) < 0 ||
        fseek(f, 0, SEEK_SET)) {
        perror(argv[2]);
        return 1;
    }
    in = malloc((size_t)size + 1);
    room = BrotliEncoderMaxCompressedSize((size_t)size);
    out = malloc(room);
    if (!in || !out || fread(in, 1, (size_t)size, f) != (size_t)size) {
        perror(argv[2]);
        return 1;
    }
    fclose(f);
    PERFLAB_PROBE_LOOP() {
        got = room;
        if (!BrotliEncoderCompress(quality, BROTLI_DEFAULT_WINDOW, BROTLI_MODE_GENERIC,
                                   (size_t)size, in, &got, out))
            return 1;
        iterations++;
    }
    printf("%zu bytes, %d iterations\n", got, iterations);
    return 0;
}
