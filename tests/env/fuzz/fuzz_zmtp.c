/* libFuzzer target: the ZMTP 3 parser of the plain client endpoints (pk_zmtp.h; issue 27,
 * finding 1). An input is a peer's byte stream; its first byte chooses whether a valid greeting
 * and READY go first (to reach traffic sooner) and the size of the pieces the bytes arrive in.
 * The stream is parsed whole and in pieces, as pk_zmtp_front buffers it: both must give the
 * same events; a frame is never larger than the limit, a message never holds more; every call
 * consumes no more than it was given; after CLOSE nothing is parsed. Any difference traps. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pk_zmtp.h"

#define MAX_MESSAGE 1024
#define MAX_EVENTS 4096
#define CHECK(c)                                                                                   \
    do {                                                                                           \
        if (!(c))                                                                                  \
            __builtin_trap();                                                                      \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct event {
    pk_zmtp_kind kind;
    size_t size;
    int more;
    uint64_t hash; /* of the bytes it points to */
} event;

static uint64_t hash(const uint8_t *p, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

/* Parses in with pieces of step bytes (0: whole); returns the number of events. */
static int parse(const uint8_t *in, size_t n, size_t step, event *ev, uint8_t *buf) {
    pk_zmtp_conn c;
    pk_zmtp_conn_init(&c, MAX_MESSAGE);
    size_t have = 0, off = 0, given = 0, message = 0;
    int count = 0;
    for (;;) {
        size_t piece = step ? step : n;
        if (piece > n - given)
            piece = n - given;
        memcpy(buf + have, in + given, piece);
        have += piece;
        given += piece;
        for (;;) {
            pk_zmtp_event e;
            size_t used = 99;
            pk_zmtp_kind k = pk_zmtp_parse(&c, buf + off, have - off, &used, &e);
            CHECK(used <= have - off);
            if (k == PK_ZMTP_NEED_MORE) {
                CHECK(used == 0);
                break;
            }
            CHECK(count < MAX_EVENTS);
            event *x = &ev[count++];
            x->kind = k;
            x->size = e.size;
            x->more = e.more;
            x->hash = e.data ? hash(e.data, e.size) : 0;
            if (k == PK_ZMTP_CLOSE) {
                CHECK(used == 0);
                pk_zmtp_event again;
                CHECK(pk_zmtp_parse(&c, buf, have, &used, &again) == PK_ZMTP_CLOSE);
                return count;
            }
            CHECK(used > 0);
            if (k == PK_ZMTP_FRAME) {
                CHECK(e.data == buf + off + (used - e.size));
                message += e.size;
                CHECK(message <= MAX_MESSAGE);
                if (!e.more)
                    message = 0;
            }
            if (k == PK_ZMTP_PING)
                CHECK(e.size <= PK_ZMTP_MAX_PING_CONTEXT);
            off += used;
        }
        if (given == n)
            return count;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1 || size > 65536)
        return 0;
    static uint8_t in[65536 + 256], buf_a[65536 + 256], buf_b[65536 + 256];
    static event a[MAX_EVENTS], b[MAX_EVENTS];
    size_t n = 0;
    if (data[0] & 1) { /* a valid greeting and READY first */
        pk_zmtp_encode_greeting(in);
        in[32] = 0; /* as a client */
        n = PK_ZMTP_GREETING_LEN;
        static const uint8_t ready[] = {0x04, 28,  5,   'R', 'E', 'A', 'D', 'Y', 11,  'S',
                                        'o',  'c', 'k', 'e', 't', '-', 'T', 'y', 'p', 'e',
                                        0,    0,   0,   6,   'D', 'E', 'A', 'L', 'E', 'R'};
        memcpy(in + n, ready, sizeof ready);
        n += sizeof ready;
    }
    memcpy(in + n, data + 1, size - 1);
    n += size - 1;
    size_t step = (size_t)(data[0] >> 1) + 1;
    int na = parse(in, n, 0, a, buf_a);
    int nb = parse(in, n, step, b, buf_b);
    CHECK(na == nb);
    for (int i = 0; i < na; i++) {
        CHECK(a[i].kind == b[i].kind);
        CHECK(a[i].size == b[i].size);
        CHECK(a[i].more == b[i].more);
        CHECK(a[i].hash == b[i].hash);
    }
    return 0;
}
