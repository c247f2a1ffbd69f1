/* Internal to pk_curve: what the socket setup needs of the server's state. */
#ifndef PK_CURVE_INTERNAL_H
#define PK_CURVE_INTERNAL_H

#include "pk_curve.h"

/* The server's secret key (Z85), for ZMQ_CURVE_SECRETKEY. */
const char *pk_curve_server_secret(const pk_curve_server *s);

#endif
