/* pk-runner: runs every rank of one job (inside the sandbox the harness built). Launcher
 * "mpi": started by mpirun, one process per rank. Launcher "fork": this process forks the
 * ranks and supervises them; if one dies, the others are killed. */
#include "pk_runner.h"
#include "rn_gpu_lock.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void usage(void) {
    fprintf(stderr,
            "usage: pk-runner --problem-dir DIR --suite S --name N --module SO\n"
            "  (--candidate SO | --reference-as-candidate) (--seed N | --seed-file F) --trials N\n"
            "  --world N --launcher fork|mpi --out FILE --progress-dir DIR [--skip-timing]\n"
            "  [--skip-reference-timing] [--wait-go] [--teardown] [--lock-setup] [--lock-exit]\n"
            "  [--lock-dir DIR --lock-ids 0,1] [--fake-setup-failure] [--regime NAME]\n"
            "  [--rank-visibility own|all]\n");
}

static int parse(int argc, char **argv, rn_opts *o) {
    memset(o, 0, sizeof *o);
    o->regime = -1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        const char **str = !strcmp(a, "--problem-dir")    ? &o->problem_dir
                           : !strcmp(a, "--suite")        ? &o->suite
                           : !strcmp(a, "--name")         ? &o->name
                           : !strcmp(a, "--module")       ? &o->module
                           : !strcmp(a, "--candidate")    ? &o->candidate
                           : !strcmp(a, "--out")          ? &o->out
                           : !strcmp(a, "--progress-dir") ? &o->progress_dir
                           : !strcmp(a, "--launcher")     ? &o->launcher
                           : !strcmp(a, "--seed-file")    ? &o->seed_file
                           : !strcmp(a, "--dump")         ? &o->dump_dir
                           : !strcmp(a, "--dims")         ? &o->dims
                           : !strcmp(a, "--lock-dir")     ? &o->lock_dir
                                                          : NULL;
        if (str && v) {
            *str = v;
            i++;
        } else if (!strcmp(a, "--seed") && v) {
            o->seed = strtoull(argv[++i], NULL, 0);
        } else if (!strcmp(a, "--trials") && v) {
            o->trials = atoi(argv[++i]);
        } else if (!strcmp(a, "--world") && v) {
            o->world = atoi(argv[++i]);
        } else if (!strcmp(a, "--skip-timing")) {
            o->skip_timing = 1;
        } else if (!strcmp(a, "--profile-call")) {
            o->profile_call = 1;
        } else if (!strcmp(a, "--skip-reference-timing")) {
            o->skip_reference_timing = 1;
        } else if (!strcmp(a, "--wait-go")) {
            o->wait_go = 1;
        } else if (!strcmp(a, "--teardown")) {
            o->teardown = 1;
        } else if (!strcmp(a, "--lock-setup")) {
            o->lock_setup = 1;
        } else if (!strcmp(a, "--lock-exit")) {
            o->lock_exit = 1;
        } else if (!strcmp(a, "--lock-ids") && v) {
            o->n_lock_ids = rn_gpu_lock_ids_parse(argv[++i], o->lock_ids, RN_LOCK_MAX);
            if (o->n_lock_ids < 0)
                return -1;
        } else if (!strcmp(a, "--fake-setup-failure")) {
            o->fake_setup_failure = 1;
        } else if (!strcmp(a, "--regime") && v) {
            o->regime = pk_regime_from_name(argv[++i]);
            if (o->regime < 0)
                return -1;
        } else if (!strcmp(a, "--rank-visibility") && v) {
            const char *mode = argv[++i];
            if (strcmp(mode, "own") != 0 && strcmp(mode, "all") != 0)
                return -1;
            o->rank_visibility_own = !strcmp(mode, "own");
        } else if (!strcmp(a, "--reference-as-candidate")) {
            o->reference_as_candidate = 1;
        } else {
            fprintf(stderr, "pk-runner: bad argument %s\n", a);
            return -1;
        }
    }
    if (!o->problem_dir || !o->suite || !o->name || !o->module || !o->out || !o->launcher ||
        (!o->candidate && !o->reference_as_candidate) || (o->wait_go && !o->progress_dir) ||
        o->trials < 1 || o->trials > PK_EVAL_MAX_TRIALS || o->world < 1 || o->world > PK_MAX_RANKS)
        return -1;
    return 0;
}

/* Waits for every rank; the first abnormal exit kills the rest (they would wait forever). */
static int supervise(const pid_t *kids, int world) {
    int alive = world, result = 0;
    while (alive > 0) {
        int status;
        pid_t pid = wait(&status);
        if (pid < 0)
            break;
        int rank = -1;
        for (int i = 0; i < world; i++)
            if (kids[i] == pid)
                rank = i;
        if (rank < 0)
            continue;
        alive--;
        int bad = WIFSIGNALED(status) || (WIFEXITED(status) && WEXITSTATUS(status) != 0);
        if (bad && result == 0) {
            result = WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
            fprintf(stderr, "pk-runner: rank %d %s %d; stopping the other ranks\n", rank,
                    WIFSIGNALED(status) ? "killed by signal" : "exited with", result & 127);
            for (int i = 0; i < world; i++)
                if (i != rank)
                    kill(kids[i], SIGKILL);
        }
    }
    return result;
}

int main(int argc, char **argv) {
    rn_opts o;
    if (parse(argc, argv, &o)) {
        usage();
        return PK_RUNNER_EXIT_INFRA;
    }
    rn_group g;
    memset(&g, 0, sizeof g);
    if (!strcmp(o.launcher, "mpi")) {
        /* Before MPI_Init, which may initialize CUDA: the rank from mpirun's environment. */
        const char *mpi_rank = getenv("OMPI_COMM_WORLD_RANK");
        if (o.rank_visibility_own && (!mpi_rank || rn_visible_apply(atoi(mpi_rank)))) {
            fprintf(stderr, "pk-runner: --rank-visibility own: no rank for this process\n");
            return PK_RUNNER_EXIT_INFRA;
        }
        if (rn_group_mpi_init(&g, &argc, &argv)) {
            fprintf(stderr, "pk-runner: MPI_Init failed\n");
            return PK_RUNNER_EXIT_INFRA;
        }
        rn_crash_markers_install(o.progress_dir, g.rank);
        int rc = rn_rank_main(&o, &g);
        rn_group_mpi_finalize(&g);
        if (!o.teardown) { /* fast exit: no atexit handlers (CUDA's own teardown) either */
            fflush(NULL);
            _exit(rc);
        }
        return rc;
    }
    if (strcmp(o.launcher, "fork") != 0) {
        usage();
        return PK_RUNNER_EXIT_INFRA;
    }
    pid_t kids[PK_MAX_RANKS] = {0};
    int who = rn_group_fork_init(&g, o.world, kids);
    if (who < 0) {
        fprintf(stderr, "pk-runner: cannot fork the ranks\n");
        return PK_RUNNER_EXIT_INFRA;
    }
    /* Exit under the locks only where there are locks to take. */
    int hold_exit = o.lock_exit && o.lock_dir && o.n_lock_ids > 0;
    if (who == 0) {
        rn_crash_markers_install(o.progress_dir, g.rank);
        /* The supervisor never initializes CUDA: each child is the first to, after this. */
        if (o.rank_visibility_own && rn_visible_apply(g.rank))
            _exit(PK_RUNNER_EXIT_INFRA);
        int rc = rn_rank_main(&o, &g);
        fflush(NULL);
        if (hold_exit)
            rn_group_fork_exit_gate(&g);
        _exit(rc);
    }
    if (hold_exit && rn_group_fork_hold_exit(&g, &o)) {
        fprintf(stderr, "pk-runner: cannot start the exit hold\n");
        for (int i = 0; i < o.world; i++)
            kill(kids[i], SIGKILL);
    }
    return supervise(kids, o.world);
}
