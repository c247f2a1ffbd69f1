/* The `pkgym sandbox` subcommand as a stand-alone binary, so that the sandbox's tests depend on
 * no other module. It runs exactly pk_cmd_sandbox, the code behind `pkgym sandbox`. */
#include "pk_sandbox.h"

int main(int argc, char **argv) {
    return pk_cmd_sandbox(argc, argv);
}
