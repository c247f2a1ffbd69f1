/* The server side of CURVE: its key pair and the ZAP handler (RFC 27) that admits a client only
 * when its public key is in the allow directory of the socket's ZAP domain. The handler answers
 * with the client's key as User-Id, which the server reads from each message ("User-Id") to
 * know who sent it. */
#define _GNU_SOURCE
#include <dirent.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <zmq.h>

#include "curve_internal.h"

#define ZAP_ENDPOINT "inproc://zeromq.zap.01"
#define MAX_DOMAINS 4
#define MAX_ZAP_FRAMES 8
#define POLL_MS 100

typedef struct allow_set {
    char domain[64];
    char *dir;
    struct timespec mtime; /* of dir when keys were read */
    char (*keys)[PK_CURVE_KEY_LEN + 1];
    size_t n;
    unsigned long admitted, refused; /* handshakes on this domain's sockets */
} allow_set;

struct pk_curve_server {
    pk_curve_keypair keys;
    void *zap; /* REP socket, used only by the handler thread once it runs */
    pthread_t thread;
    int running;
    atomic_int stop;
    pthread_mutex_t lock; /* guards domains */
    allow_set domains[MAX_DOMAINS];
    int n_domains;
    atomic_ulong admitted, refused;
    atomic_ullong next_client_id; /* the routing ids given to admitted clients */
};

/* Reads dir's keys into set (replacing them). Files that hold no key are reported once. */
static int load_dir(allow_set *set, pk_error *err) {
    struct stat st;
    if (stat(set->dir, &st) != 0 || !S_ISDIR(st.st_mode))
        return pk_error_errno(err, PK_ERR_NOT_FOUND, "allow directory %s", set->dir);
    DIR *d = opendir(set->dir);
    if (!d)
        return pk_error_errno(err, PK_ERR_IO, "open allow directory %s", set->dir);
    char(*keys)[PK_CURVE_KEY_LEN + 1] = NULL;
    size_t n = 0, cap = 0;
    int rc = PK_OK;
    for (struct dirent *e; rc == PK_OK && (e = readdir(d));) {
        if (e->d_name[0] == '.')
            continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", set->dir, e->d_name);
        struct stat fst;
        if (stat(path, &fst) != 0 || !S_ISREG(fst.st_mode))
            continue;
        pk_curve_keypair kp;
        pk_error kerr;
        if (pk_curve_key_load(path, 0, &kp, &kerr) != PK_OK) {
            fprintf(stderr, "pkgym: --curve-allow: skipped %s: %s\n", path, kerr.message);
            continue;
        }
        if (n == cap) {
            cap = cap ? 2 * cap : 16;
            void *grown = realloc(keys, cap * sizeof *keys);
            if (!grown) {
                rc = pk_error_set(err, PK_ERR_NOMEM, "out of memory");
                break;
            }
            keys = grown;
        }
        memcpy(keys[n++], kp.public_key, PK_CURVE_KEY_LEN + 1);
    }
    closedir(d);
    if (rc) {
        free(keys);
        return rc;
    }
    free(set->keys);
    set->keys = keys;
    set->n = n;
    set->mtime = st.st_mtim;
    return PK_OK;
}

static int key_allowed(pk_curve_server *s, const char *domain, const char *key) {
    int ok = 0;
    pthread_mutex_lock(&s->lock);
    for (int i = 0; i < s->n_domains; i++) {
        allow_set *set = &s->domains[i];
        if (strcmp(set->domain, domain) != 0)
            continue;
        struct stat st;
        if (stat(set->dir, &st) == 0 &&
            (st.st_mtim.tv_sec != set->mtime.tv_sec || st.st_mtim.tv_nsec != set->mtime.tv_nsec)) {
            pk_error err;
            if (load_dir(set, &err) != PK_OK)
                fprintf(stderr, "pkgym: reloading allowed keys: %s\n", err.message);
        }
        for (size_t k = 0; k < set->n && !ok; k++)
            ok = strcmp(set->keys[k], key) == 0;
        if (ok)
            set->admitted++;
        else
            set->refused++;
    }
    pthread_mutex_unlock(&s->lock);
    return ok;
}

/* metadata: ZMTP properties for the connection ("" for none). */
static void send_reply_with(void *sock, const zmq_msg_t *request_id, const char *code,
                            const char *text, const char *user_id, const void *metadata,
                            size_t metadata_len) {
    zmq_send(sock, "1.0", 3, ZMQ_SNDMORE);
    zmq_send(sock, zmq_msg_data((zmq_msg_t *)request_id), zmq_msg_size((zmq_msg_t *)request_id),
             ZMQ_SNDMORE);
    zmq_send(sock, code, strlen(code), ZMQ_SNDMORE);
    zmq_send(sock, text, strlen(text), ZMQ_SNDMORE);
    zmq_send(sock, user_id, strlen(user_id), ZMQ_SNDMORE);
    zmq_send(sock, metadata, metadata_len, 0);
}

static void send_reply(void *sock, const zmq_msg_t *request_id, const char *code, const char *text,
                       const char *user_id) {
    send_reply_with(sock, request_id, code, text, user_id, "", 0);
}

/* Admits a client connection with a routing id of the server's choosing: the ZAP reply's
 * "Identity" property replaces the one the client sent (libzmq 4.3.4 reads it after the
 * client's CURVE INITIATE). The ids are 16 bytes from a counter, never the 5 bytes starting
 * with 0 that the ROUTER makes for peers without an id, and unique: no client can take
 * another's id or the next generated one (issue 27, finding 1). */
#define PK_ZAP_CLIENT_HOLD_MS 20

static void admit_client(pk_curve_server *s, const zmq_msg_t *request_id, const char *user_id) {
    static const char name[] = "Identity";
    unsigned char meta[1 + sizeof name - 1 + 4 + 16], *p = meta;
    uint64_t n = (uint64_t)atomic_fetch_add(&s->next_client_id, 1);
    *p++ = (unsigned char)(sizeof name - 1);
    memcpy(p, name, sizeof name - 1);
    p += sizeof name - 1;
    *p++ = 0, *p++ = 0, *p++ = 0, *p++ = 16;
    memcpy(p, "\x01pkgym-c", 8);
    for (int i = 0; i < 8; i++)
        p[8 + i] = (unsigned char)(n >> (56 - 8 * i));
    /* The I/O thread reads a reply already there right after sending the request, before it
     * reads the client's INITIATE metadata, whose id would then win: with the reply held back
     * that long, it is read later. Only handshakes wait: 50 a second at most. */
    const struct timespec hold = {0, PK_ZAP_CLIENT_HOLD_MS * 1000000L};
    nanosleep(&hold, NULL);
    send_reply_with(s->zap, request_id, "200", "OK", user_id, meta, sizeof meta);
}

static int frame_is(zmq_msg_t *m, const char *s) {
    size_t n = strlen(s);
    return zmq_msg_size(m) == n && memcmp(zmq_msg_data(m), s, n) == 0;
}

/* One ZAP request: version, request id, domain, address, routing id, mechanism, credentials. */
static void handle_request(pk_curve_server *s) {
    zmq_msg_t f[MAX_ZAP_FRAMES];
    int n = 0, more = 1;
    while (more) {
        zmq_msg_t part;
        zmq_msg_init(&part);
        if (zmq_msg_recv(&part, s->zap, 0) < 0) {
            zmq_msg_close(&part);
            break;
        }
        more = zmq_msg_more(&part);
        if (n < MAX_ZAP_FRAMES) {
            zmq_msg_init(&f[n]);
            zmq_msg_move(&f[n++], &part);
        }
        zmq_msg_close(&part);
    }
    if (n < 6) {
        /* REP must still answer something to stay in step. */
        zmq_msg_t empty;
        zmq_msg_init(&empty);
        send_reply(s->zap, &empty, "500", "malformed ZAP request", "");
        zmq_msg_close(&empty);
    } else if (!frame_is(&f[0], "1.0")) {
        send_reply(s->zap, &f[1], "500", "unsupported ZAP version", "");
    } else if (frame_is(&f[5], "CURVE") && n >= 7 && zmq_msg_size(&f[6]) == 32) {
        char domain[64] = "", key[PK_CURVE_KEY_LEN + 1];
        size_t dl = zmq_msg_size(&f[2]) < sizeof domain ? zmq_msg_size(&f[2]) : 0;
        memcpy(domain, zmq_msg_data(&f[2]), dl);
        domain[dl] = '\0';
        zmq_z85_encode(key, zmq_msg_data(&f[6]), 32);
        if (key_allowed(s, domain, key)) {
            atomic_fetch_add(&s->admitted, 1);
            if (strcmp(domain, PK_CURVE_DOMAIN_CLIENTS) == 0)
                admit_client(s, &f[1], key);
            else /* workers name themselves: the broker knows them by their ids */
                send_reply(s->zap, &f[1], "200", "OK", key);
        } else {
            atomic_fetch_add(&s->refused, 1);
            send_reply(s->zap, &f[1], "400", "key not authorized", "");
        }
    } else if (frame_is(&f[5], "NULL")) {
        /* A plain listener of this context (ipc://, or loopback tcp:// without CURVE): the
         * binder chose no authentication there; only such a listener offers NULL. */
        send_reply(s->zap, &f[1], "200", "OK", "");
    } else {
        atomic_fetch_add(&s->refused, 1);
        send_reply(s->zap, &f[1], "400", "mechanism not allowed", "");
    }
    for (int i = 0; i < n; i++)
        zmq_msg_close(&f[i]);
}

static void *zap_main(void *arg) {
    pk_curve_server *s = arg;
    while (!atomic_load(&s->stop)) {
        zmq_pollitem_t it = {s->zap, 0, ZMQ_POLLIN, 0};
        int r = zmq_poll(&it, 1, POLL_MS);
        if (r < 0 && zmq_errno() == ETERM)
            break;
        if (r > 0 && (it.revents & ZMQ_POLLIN))
            handle_request(s);
    }
    return NULL;
}

int pk_curve_server_start(void *zctx, const char *secret_key_file, pk_curve_server **out,
                          pk_error *err) {
    *out = NULL;
    if (!pk_curve_available())
        return pk_error_set(err, PK_ERR_UNSUPPORTED, "this libzmq was built without CURVE");
    pk_curve_server *s = calloc(1, sizeof *s);
    if (!s)
        return pk_error_set(err, PK_ERR_NOMEM, "out of memory");
    pthread_mutex_init(&s->lock, NULL);
    int rc = pk_curve_key_load(secret_key_file, 1, &s->keys, err);
    if (rc) {
        pk_curve_server_stop(s);
        return rc;
    }
    s->zap = zmq_socket(zctx, ZMQ_REP);
    int linger = 0;
    if (!s->zap || zmq_setsockopt(s->zap, ZMQ_LINGER, &linger, sizeof linger) != 0 ||
        zmq_bind(s->zap, ZAP_ENDPOINT) != 0) {
        rc = pk_error_set(err, PK_ERR_SYSTEM, "ZAP handler: bind %s: %s", ZAP_ENDPOINT,
                          zmq_strerror(zmq_errno()));
        pk_curve_server_stop(s);
        return rc;
    }
    if (pthread_create(&s->thread, NULL, zap_main, s) != 0) {
        pk_curve_server_stop(s);
        return pk_error_set(err, PK_ERR_SYSTEM, "cannot start the ZAP handler thread");
    }
    s->running = 1;
    *out = s;
    return PK_OK;
}

int pk_curve_server_allow(pk_curve_server *s, const char *domain, const char *dir, pk_error *err) {
    if (!s || !domain || !dir || strlen(domain) >= sizeof s->domains[0].domain)
        return pk_error_set(err, PK_ERR_INVALID, "pk_curve_server_allow: bad arguments");
    pthread_mutex_lock(&s->lock);
    int rc = PK_OK;
    if (s->n_domains == MAX_DOMAINS) {
        rc = pk_error_set(err, PK_ERR_INVALID, "at most %d ZAP domains", MAX_DOMAINS);
    } else {
        allow_set *set = &s->domains[s->n_domains];
        memset(set, 0, sizeof *set);
        snprintf(set->domain, sizeof set->domain, "%s", domain);
        set->dir = strdup(dir);
        rc = set->dir ? load_dir(set, err) : pk_error_set(err, PK_ERR_NOMEM, "out of memory");
        if (rc == PK_OK) {
            s->n_domains++;
            if (set->n == 0)
                fprintf(stderr,
                        "pkgym: warning: %s holds no public key yet: every client is refused "
                        "until one is added\n",
                        dir);
        } else {
            free(set->dir);
            free(set->keys);
        }
    }
    pthread_mutex_unlock(&s->lock);
    return rc;
}

const char *pk_curve_server_secret(const pk_curve_server *s) {
    return s->keys.secret_key;
}

const char *pk_curve_server_public_key(const pk_curve_server *s) {
    return s->keys.public_key;
}

void pk_curve_server_counts(const pk_curve_server *s, unsigned long *admitted,
                            unsigned long *refused) {
    *admitted = atomic_load(&((pk_curve_server *)s)->admitted);
    *refused = atomic_load(&((pk_curve_server *)s)->refused);
}

void pk_curve_server_domain_counts(pk_curve_server *s, const char *domain, unsigned long *admitted,
                                   unsigned long *refused) {
    *admitted = *refused = 0;
    pthread_mutex_lock(&s->lock);
    for (int i = 0; i < s->n_domains; i++)
        if (strcmp(s->domains[i].domain, domain) == 0) {
            *admitted += s->domains[i].admitted;
            *refused += s->domains[i].refused;
        }
    pthread_mutex_unlock(&s->lock);
}

void pk_curve_server_stop(pk_curve_server *s) {
    if (!s)
        return;
    atomic_store(&s->stop, 1);
    if (s->running)
        pthread_join(s->thread, NULL);
    if (s->zap)
        zmq_close(s->zap);
    for (int i = 0; i < s->n_domains; i++) {
        free(s->domains[i].dir);
        free(s->domains[i].keys);
    }
    pthread_mutex_destroy(&s->lock);
    memset(s->keys.secret_key, 0, sizeof s->keys.secret_key);
    free(s);
}
