/* libFuzzer target: the request decoder and the conversion of a decoded request to JSON. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "pk_client.h"
#include "pk_protocol.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    pk_request r;
    pk_error err;
    if (pk_request_decode(&r, data, size, 1 << 20, &err) == PK_OK) {
        json_t *j = NULL;
        if (pk_json_from_msgpack(&r.unpacked.data, "request", PK_MAX_NESTING, &j, &err) == PK_OK)
            json_decref(j);
        char *s;
        pk_request_str(&r, "problem", 0, 1 << 20, &s, &err);
        free(s);
        long long v;
        int present;
        pk_request_int(&r, "seed", &v, &present, &err);
        char *id;
        size_t len;
        if (pk_request_copy_id(&r, &id, &len, &err) == PK_OK)
            free(id);
    }
    pk_request_free(&r);
    return 0;
}
