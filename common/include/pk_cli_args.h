/* pk_cli_args: the option values of the pkgym subcommands, parsed alike. A bad value is said
 * on stderr, "pkgym <cmd>: <opt> wants ..., got '<value>'", and returns -1; else 0. */
#ifndef PK_CLI_ARGS_H
#define PK_CLI_ARGS_H

#ifdef __cplusplus
extern "C" {
#endif

/* A whole decimal number in [lo, hi]. v may be NULL (the option's value is missing). */
int pk_arg_long(const char *cmd, const char *opt, const char *v, long lo, long hi, long *out);
/* A positive finite number, at most 1e12; `what` names it in the message ("number"). */
int pk_arg_positive(const char *cmd, const char *opt, const char *v, const char *what, double *out);

#ifdef __cplusplus
}
#endif
#endif
