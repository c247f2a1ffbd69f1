/* The ZMTP 3.0/3.1 server side of one connection, NULL mechanism (pk_zmtp.h). */
#include "pk_zmtp.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#define FLAG_MORE 0x01
#define FLAG_LONG 0x02
#define FLAG_COMMAND 0x04
#define FLAG_RESERVED 0xF8

static pk_zmtp_kind closing(pk_zmtp_conn *c, pk_zmtp_event *ev, int send_error, const char *fmt,
                            ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ev->reason, sizeof ev->reason, fmt, ap);
    va_end(ap);
    c->phase = PK_ZMTP_PHASE_CLOSED;
    ev->kind = PK_ZMTP_CLOSE;
    ev->send_error = send_error;
    return PK_ZMTP_CLOSE;
}

void pk_zmtp_conn_init(pk_zmtp_conn *c, size_t max_message) {
    memset(c, 0, sizeof *c);
    c->phase = PK_ZMTP_PHASE_GREETING;
    c->max_message = max_message;
}

/* The greeting: each check is made as soon as its bytes are there, so that a peer that does
 * not speak ZMTP 3 (HTTP, ZMTP 1.0 or 2.0, noise) is closed without waiting for 64 bytes. */
static pk_zmtp_kind parse_greeting(pk_zmtp_conn *c, const uint8_t *b, size_t len, size_t *used,
                                   pk_zmtp_event *ev) {
    if (len >= 1 && b[0] != 0xFF)
        return closing(c, ev, 0, "not a ZMTP peer (greeting does not start with 0xFF)");
    if (len >= PK_ZMTP_SIGNATURE_LEN && !(b[9] & 0x01))
        return closing(c, ev, 0, "ZMTP 1.0 peer (the server speaks ZMTP 3)");
    if (len >= 11 && b[10] < 3)
        return closing(c, ev, 0, "ZMTP %u peer (the server speaks ZMTP 3)", (unsigned)b[10]);
    if (len < PK_ZMTP_GREETING_LEN)
        return PK_ZMTP_NEED_MORE;
    static const uint8_t null_mechanism[20] = {'N', 'U', 'L', 'L'};
    if (memcmp(b + 12, null_mechanism, sizeof null_mechanism) != 0)
        return closing(c, ev, 0, "security mechanism other than NULL (use the CURVE endpoint)");
    c->minor = b[10] > 3 ? 1 : b[11];
    c->phase = PK_ZMTP_PHASE_HANDSHAKE;
    *used = PK_ZMTP_GREETING_LEN;
    ev->kind = PK_ZMTP_CONSUMED;
    return PK_ZMTP_CONSUMED;
}

static uint32_t get_u32(const uint8_t *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

static int name_is(const uint8_t *name, size_t n, const char *want) {
    return n == strlen(want) && memcmp(name, want, n) == 0;
}

/* READY's properties: the peer's Socket-Type decides; Identity and the rest are ignored (the
 * server names its peers itself). */
static pk_zmtp_kind parse_ready(pk_zmtp_conn *c, const uint8_t *p, size_t n, pk_zmtp_event *ev) {
    int have_type = 0;
    while (n > 0) {
        size_t name_len = p[0];
        if (1 + name_len + 4 > n)
            return closing(c, ev, 1, "malformed READY metadata");
        const uint8_t *name = p + 1;
        uint32_t value_len = get_u32(p + 1 + name_len);
        p += 1 + name_len + 4;
        n -= 1 + name_len + 4;
        if (value_len > n)
            return closing(c, ev, 1, "malformed READY metadata");
        if (name_len == 11 && strncasecmp((const char *)name, "Socket-Type", 11) == 0) {
            if (value_len >= sizeof ev->peer_type)
                return closing(c, ev, 1, "Socket-Type too long");
            memcpy(ev->peer_type, p, value_len);
            ev->peer_type[value_len] = '\0';
            have_type = 1;
        }
        p += value_len;
        n -= value_len;
    }
    if (!have_type)
        return closing(c, ev, 1, "READY without Socket-Type");
    if (strcmp(ev->peer_type, "DEALER") != 0 && strcmp(ev->peer_type, "REQ") != 0) {
        char type[sizeof ev->peer_type * 4];
        size_t k = 0; /* printable for the log and the ERROR */
        for (const char *t = ev->peer_type; *t && k < sizeof type - 1; t++)
            type[k++] = (*t >= 0x20 && *t < 0x7f) ? *t : '?';
        type[k] = '\0';
        return closing(c, ev, 1, "socket type %s is not served: connect a DEALER or REQ socket",
                       type);
    }
    c->phase = PK_ZMTP_PHASE_TRAFFIC;
    ev->kind = PK_ZMTP_READY;
    return PK_ZMTP_READY;
}

static pk_zmtp_kind parse_command(pk_zmtp_conn *c, const uint8_t *body, size_t size,
                                  pk_zmtp_event *ev) {
    if (size < 1 || 1 + (size_t)body[0] > size)
        return closing(c, ev, 1, "malformed command");
    const uint8_t *name = body + 1, *data = body + 1 + body[0];
    size_t name_len = body[0], data_len = size - 1 - name_len;
    if (name_is(name, name_len, "ERROR"))
        return closing(c, ev, 0, "the peer sent ERROR");
    if (c->phase == PK_ZMTP_PHASE_HANDSHAKE) {
        if (!name_is(name, name_len, "READY"))
            return closing(c, ev, 1, "expected READY (NULL mechanism)");
        return parse_ready(c, data, data_len, ev);
    }
    if (name_is(name, name_len, "PING")) {
        if (data_len < 2 || data_len - 2 > PK_ZMTP_MAX_PING_CONTEXT)
            return closing(c, ev, 1, "malformed PING");
        ev->kind = PK_ZMTP_PING;
        ev->data = data + 2; /* after the TTL */
        ev->size = data_len - 2;
        return PK_ZMTP_PING;
    }
    if (name_is(name, name_len, "READY"))
        return closing(c, ev, 1, "READY sent twice");
    /* PONG, and commands of other socket types or later versions: nothing to do. */
    ev->kind = PK_ZMTP_CONSUMED;
    return PK_ZMTP_CONSUMED;
}

pk_zmtp_kind pk_zmtp_parse(pk_zmtp_conn *c, const uint8_t *buf, size_t len, size_t *used,
                           pk_zmtp_event *ev) {
    memset(ev, 0, sizeof *ev);
    *used = 0;
    if (c->phase == PK_ZMTP_PHASE_CLOSED) {
        ev->kind = PK_ZMTP_CLOSE;
        snprintf(ev->reason, sizeof ev->reason, "closed");
        return PK_ZMTP_CLOSE;
    }
    if (c->phase == PK_ZMTP_PHASE_GREETING)
        return parse_greeting(c, buf, len, used, ev);
    if (len < 1)
        return PK_ZMTP_NEED_MORE;
    uint8_t flags = buf[0];
    if (flags & FLAG_RESERVED)
        return closing(c, ev, 1, "malformed frame (reserved flags 0x%02x)", (unsigned)flags);
    int is_command = (flags & FLAG_COMMAND) != 0, more = (flags & FLAG_MORE) != 0;
    if (is_command && more)
        return closing(c, ev, 1, "malformed frame (a command with MORE)");
    if (c->phase == PK_ZMTP_PHASE_HANDSHAKE && !is_command)
        return closing(c, ev, 1, "a message before READY");
    size_t header = (flags & FLAG_LONG) ? 9 : 2;
    if (len < header)
        return PK_ZMTP_NEED_MORE;
    uint64_t size = buf[1];
    if (flags & FLAG_LONG) {
        size = 0;
        for (int i = 1; i < 9; i++)
            size = size << 8 | buf[i];
    }
    if (is_command) {
        if (size > PK_ZMTP_MAX_COMMAND)
            return closing(c, ev, 1, "command of %llu bytes (at most %d)", (unsigned long long)size,
                           PK_ZMTP_MAX_COMMAND);
    } else if (size > c->max_message || c->message_bytes + size > c->max_message) {
        /* Before its bytes are buffered: the peer cannot make the server hold more. */
        return closing(c, ev, 1, "message larger than %zu bytes", c->max_message);
    }
    if (len - header < size)
        return PK_ZMTP_NEED_MORE;
    const uint8_t *body = buf + header;
    if (is_command) {
        pk_zmtp_kind k = parse_command(c, body, (size_t)size, ev);
        if (k != PK_ZMTP_CLOSE)
            *used = header + (size_t)size;
        return k;
    }
    c->message_bytes = more ? c->message_bytes + (size_t)size : 0;
    *used = header + (size_t)size;
    ev->kind = PK_ZMTP_FRAME;
    ev->data = body;
    ev->size = (size_t)size;
    ev->more = more;
    return PK_ZMTP_FRAME;
}

void pk_zmtp_encode_greeting(uint8_t out[PK_ZMTP_GREETING_LEN]) {
    memset(out, 0, PK_ZMTP_GREETING_LEN);
    out[0] = 0xFF;
    out[9] = 0x7F;
    out[10] = 3; /* ZMTP 3.1 */
    out[11] = 1;
    memcpy(out + 12, "NULL", 4);
    out[32] = 1; /* as-server */
}

/* A command frame: header, then name-size, name, data. */
static size_t command(uint8_t *out, size_t cap, const char *name, const uint8_t *data, size_t len) {
    size_t name_len = strlen(name), body = 1 + name_len + len;
    uint8_t head[9];
    size_t h = pk_zmtp_encode_frame_header(head, body, 0);
    if (h + body > cap)
        return 0;
    head[0] |= FLAG_COMMAND;
    memcpy(out, head, h);
    out[h] = (uint8_t)name_len;
    memcpy(out + h + 1, name, name_len);
    if (len)
        memcpy(out + h + 1 + name_len, data, len);
    return h + body;
}

size_t pk_zmtp_encode_ready(uint8_t *out, size_t cap, const char *socket_type) {
    uint8_t props[64];
    size_t tl = strlen(socket_type);
    if (tl > sizeof props - 16)
        return 0;
    props[0] = 11;
    memcpy(props + 1, "Socket-Type", 11);
    props[12] = (uint8_t)(tl >> 24);
    props[13] = (uint8_t)(tl >> 16);
    props[14] = (uint8_t)(tl >> 8);
    props[15] = (uint8_t)tl;
    memcpy(props + 16, socket_type, tl);
    return command(out, cap, "READY", props, 16 + tl);
}

size_t pk_zmtp_encode_error(uint8_t *out, size_t cap, const char *reason) {
    uint8_t data[256];
    size_t n = strlen(reason);
    if (n > 255)
        n = 255;
    data[0] = (uint8_t)n;
    memcpy(data + 1, reason, n);
    return command(out, cap, "ERROR", data, 1 + n);
}

size_t pk_zmtp_encode_pong(uint8_t *out, size_t cap, const uint8_t *context, size_t len) {
    if (len > PK_ZMTP_MAX_PING_CONTEXT)
        return 0;
    return command(out, cap, "PONG", context, len);
}

size_t pk_zmtp_encode_frame_header(uint8_t out[9], size_t size, int more) {
    uint8_t flags = more ? FLAG_MORE : 0;
    if (size <= 255) {
        out[0] = flags;
        out[1] = (uint8_t)size;
        return 2;
    }
    out[0] = flags | FLAG_LONG;
    uint64_t s = size;
    for (int i = 8; i >= 1; i--, s >>= 8)
        out[i] = (uint8_t)(s & 0xFF);
    return 9;
}
