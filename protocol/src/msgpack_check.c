/* A structural pre-check of one msgpack value, run before msgpack-c unpacks a request: every
 * declared length must fit in the frame (so a 5-byte map32 header cannot make the unpacker
 * allocate gigabytes) and containers must nest at most max_depth deep. */
#include "pk_protocol.h"

#include <string.h>

static uint64_t read_be(const uint8_t *p, int n) {
    uint64_t v = 0;
    for (int i = 0; i < n; i++)
        v = (v << 8) | p[i];
    return v;
}

/* Bytes that follow the tag byte b, or -1 when b needs a length field (handled by caller). */
static int fixed_payload(uint8_t b) {
    if (b <= 0x7f || b >= 0xe0 || b == 0xc0 || b == 0xc2 || b == 0xc3)
        return 0;
    switch (b) {
    case 0xca:
        return 4;
    case 0xcb:
        return 8;
    case 0xcc:
    case 0xd0:
        return 1;
    case 0xcd:
    case 0xd1:
        return 2;
    case 0xce:
    case 0xd2:
        return 4;
    case 0xcf:
    case 0xd3:
        return 8;
    case 0xd4:
        return 2;
    case 0xd5:
        return 3;
    case 0xd6:
        return 5;
    case 0xd7:
        return 9;
    case 0xd8:
        return 17;
    }
    return -1;
}

int pk_msgpack_check(const void *data, size_t len, int max_depth, pk_error *err) {
    const uint8_t *buf = data;
    uint64_t need[PK_MAX_NESTING + 1];
    if (max_depth > PK_MAX_NESTING)
        max_depth = PK_MAX_NESTING;
    int top = 0;
    need[0] = 1;
    size_t pos = 0;
    while (top >= 0) {
        if (need[top] == 0) {
            top--;
            continue;
        }
        need[top]--;
        if (pos >= len)
            return pk_error_set(err, PK_ERR_INVALID, "not msgpack: truncated at byte %zu", pos);
        uint8_t b = buf[pos++];
        int fixed = fixed_payload(b);
        uint64_t skip = 0, count = 0;
        int container = 0; /* 1 array, 2 map */
        if (fixed >= 0) {
            skip = (uint64_t)fixed;
        } else if (b >= 0x80 && b <= 0x8f) {
            container = 2;
            count = b & 0x0f;
        } else if (b >= 0x90 && b <= 0x9f) {
            container = 1;
            count = b & 0x0f;
        } else if (b >= 0xa0 && b <= 0xbf) {
            skip = b & 0x1f;
        } else {
            int lenbytes, extra = 0;
            switch (b) {
            case 0xc4: /* bin8, str8 */
            case 0xd9:
                lenbytes = 1;
                break;
            case 0xc5:
            case 0xda:
            case 0xdc:
            case 0xde:
                lenbytes = 2;
                break;
            case 0xc6:
            case 0xdb:
            case 0xdd:
            case 0xdf:
                lenbytes = 4;
                break;
            case 0xc7: /* ext: length, then a type byte */
                lenbytes = 1, extra = 1;
                break;
            case 0xc8:
                lenbytes = 2, extra = 1;
                break;
            case 0xc9:
                lenbytes = 4, extra = 1;
                break;
            default:
                return pk_error_set(err, PK_ERR_INVALID, "not msgpack: invalid byte 0x%02x at %zu",
                                    b, pos - 1);
            }
            if ((size_t)lenbytes > len - pos)
                return pk_error_set(err, PK_ERR_INVALID, "not msgpack: truncated at byte %zu", pos);
            uint64_t n = read_be(buf + pos, lenbytes);
            pos += (size_t)lenbytes;
            if (b == 0xdc || b == 0xdd)
                container = 1, count = n;
            else if (b == 0xde || b == 0xdf)
                container = 2, count = n;
            else
                skip = n + (uint64_t)extra;
        }
        if (skip > len - pos)
            return pk_error_set(err, PK_ERR_INVALID,
                                "not msgpack: a value at byte %zu runs past the end", pos);
        pos += (size_t)skip;
        if (container && count > 0) {
            uint64_t items = count * (uint64_t)container;
            if (items > len - pos)
                return pk_error_set(err, PK_ERR_INVALID,
                                    "not msgpack: a container at byte %zu declares %llu items "
                                    "but the frame holds fewer bytes",
                                    pos, (unsigned long long)items);
            if (top + 1 > max_depth)
                return pk_error_set(err, PK_ERR_INVALID,
                                    "request nests containers deeper than %d levels", max_depth);
            need[++top] = items;
        }
    }
    if (pos != len)
        return pk_error_set(err, PK_ERR_INVALID,
                            "not one msgpack value: %zu trailing bytes after the first value",
                            len - pos);
    return PK_OK;
}
