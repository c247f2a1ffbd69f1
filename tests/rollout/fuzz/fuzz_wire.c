/* libFuzzer target: the broker <-> worker wire (pk_wire.h), as the broker reads what workers
 * send and a worker reads what the broker sends. A decoded job or result is packed again. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "pk_wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    msgpack_unpacked u;
    int type;
    pk_error err;
    if (pk_wire_decode(data, size, &u, &type, &err) == PK_OK) {
        msgpack_sbuffer sb;
        msgpack_sbuffer_init(&sb);
        if (type == PK_WIRE_JOB) {
            pk_wire_job j;
            if (pk_wire_unpack_job(&u.data, &j, &err) == PK_OK) {
                pk_wire_pack_job(&sb, &j);
                pk_wire_job_free(&j);
            }
        } else if (type == PK_WIRE_RESULT) {
            pk_wire_result r;
            if (pk_wire_unpack_result(&u.data, &r, &err) == PK_OK)
                pk_wire_pack_result(&sb, &r);
            pk_wire_result_free(&r);
        } else if (type == PK_WIRE_READY) {
            json_t *info = NULL;
            if (pk_wire_unpack_ready(&u.data, &info, &err) == PK_OK)
                pk_wire_pack_ready(&sb, info);
            json_decref(info);
        }
        msgpack_sbuffer_destroy(&sb);
    }
    msgpack_unpacked_destroy(&u);
    return 0;
}
