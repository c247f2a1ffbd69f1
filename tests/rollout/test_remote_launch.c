/* How a worker reads its launcher (mpirun, srun, PMI), which GPUs it takes when several
 * workers share a node, NVLink domains (from a link matrix and from `nvidia-smi topo -m`),
 * and that the launcher's variables are removed before the harness starts its own mpirun. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "pk_gpu_topology.h"
#include "pk_launch_env.h"

static const char *const *vars; /* NAME, VALUE, ..., NULL */

static const char *table_get(const char *name) {
    for (int i = 0; vars && vars[i]; i += 2)
        if (strcmp(vars[i], name) == 0)
            return vars[i + 1];
    return NULL;
}

static void test_mpirun_env(void **state) {
    (void)state;
    static const char *const v[] = {"OMPI_COMM_WORLD_RANK",
                                    "5",
                                    "OMPI_COMM_WORLD_SIZE",
                                    "8",
                                    "OMPI_COMM_WORLD_LOCAL_RANK",
                                    "1",
                                    "OMPI_COMM_WORLD_LOCAL_SIZE",
                                    "4",
                                    NULL};
    vars = v;
    pk_launch_env e;
    pk_launch_env_read(&e, table_get);
    assert_string_equal(e.kind, "mpirun");
    assert_int_equal(e.rank, 5);
    assert_int_equal(e.size, 8);
    assert_int_equal(e.local_rank, 1);
    assert_int_equal(e.local_size, 4);
    assert_string_equal(e.cuda_visible, "");
}

static void test_srun_env(void **state) {
    (void)state;
    /* Node 3 of "2(x3),1" runs one task. */
    static const char *const v[] = {"SLURM_PROCID",
                                    "6",
                                    "SLURM_NTASKS",
                                    "7",
                                    "SLURM_LOCALID",
                                    "0",
                                    "SLURM_NODEID",
                                    "3",
                                    "SLURM_STEP_TASKS_PER_NODE",
                                    "2(x3),1",
                                    "CUDA_VISIBLE_DEVICES",
                                    "0,1",
                                    NULL};
    vars = v;
    pk_launch_env e;
    pk_launch_env_read(&e, table_get);
    assert_string_equal(e.kind, "srun");
    assert_int_equal(e.rank, 6);
    assert_int_equal(e.size, 7);
    assert_int_equal(e.local_rank, 0);
    assert_int_equal(e.local_size, 1);
    assert_string_equal(e.cuda_visible, "0,1");
    assert_int_equal(pk_slurm_tasks_on_node("2(x3),1", 0), 2);
    assert_int_equal(pk_slurm_tasks_on_node("2(x3),1", 2), 2);
    assert_int_equal(pk_slurm_tasks_on_node("2(x3),1", 3), 1);
    assert_int_equal(pk_slurm_tasks_on_node("2(x3),1", 4), -1);
    assert_int_equal(pk_slurm_tasks_on_node("4", 0), 4);
    assert_int_equal(pk_slurm_tasks_on_node("2(x", 0), -1);
    assert_int_equal(pk_slurm_tasks_on_node(NULL, 0), -1);
}

static void test_no_launcher(void **state) {
    (void)state;
    vars = NULL;
    pk_launch_env e;
    pk_launch_env_read(&e, table_get);
    assert_string_equal(e.kind, "none");
    assert_int_equal(e.rank, -1);
    assert_int_equal(e.local_rank, 0);
    assert_int_equal(e.local_size, 1);
}

/* n GPUs; links between consecutive members of groups of group_size. */
static void make_topology(pk_gpu_topology *t, int n, int group_size) {
    memset(t, 0, sizeof *t);
    unsigned char links[PK_TOPO_MAX_GPUS * PK_TOPO_MAX_GPUS];
    memset(links, 0, sizeof links);
    t->n_gpus = n;
    for (int i = 0; i < n; i++) {
        t->gpus[i].index = i;
        snprintf(t->gpus[i].name, sizeof t->gpus[i].name, "NVIDIA H200");
        snprintf(t->gpus[i].uuid, sizeof t->gpus[i].uuid, "GPU-%04d", i);
        if (i + 1 < n && (i + 1) % group_size != 0)
            links[i * n + i + 1] = links[(i + 1) * n + i] = 1;
    }
    pk_gpu_domains_from_links(n, links, t->domain, &t->n_domains);
}

static pk_launch_env local(int rank, int size, const char *cvd) {
    pk_launch_env e;
    memset(&e, 0, sizeof e);
    snprintf(e.kind, sizeof e.kind, "mpirun");
    e.rank = e.local_rank = rank;
    e.size = e.local_size = size;
    snprintf(e.cuda_visible, sizeof e.cuda_visible, "%s", cvd);
    return e;
}

static void test_domains(void **state) {
    (void)state;
    pk_gpu_topology t;
    make_topology(&t, 8, 4);
    assert_int_equal(t.n_domains, 2);
    for (int i = 0; i < 8; i++)
        assert_int_equal(t.domain[i], i < 4 ? 0 : 1);
    int pos[PK_TOPO_MAX_GPUS];
    assert_int_equal(pk_gpu_topology_largest_domain(&t, pos), 4);
    assert_int_equal(pos[0], 0);
    make_topology(&t, 3, 1); /* no links: three domains of one */
    assert_int_equal(t.n_domains, 3);
    assert_int_equal(pk_gpu_topology_largest_domain(&t, pos), 1);
}

static void test_domains_without_nvlink(void **state) {
    (void)state;
    pk_gpu_topology t;
    make_topology(&t, 4, 2); /* two NVLink pairs */
    unsigned char links[16] = {0};
    links[0 * 4 + 1] = links[1 * 4 + 0] = 1;
    links[2 * 4 + 3] = links[3 * 4 + 2] = 1;
    pk_gpu_topology_set_domains(&t, links, "nvml");
    assert_int_equal(t.n_domains, 2);
    assert_string_equal(t.source, "nvml");
    /* PCIe only: one domain, as a single-machine server uses the GPUs. */
    memset(links, 0, sizeof links);
    pk_gpu_topology_set_domains(&t, links, "nvml");
    assert_int_equal(t.n_domains, 1);
    assert_string_equal(t.source, "pcie");
    /* Links not readable: one domain too, said so. */
    pk_gpu_topology_set_domains(&t, NULL, "unknown");
    assert_int_equal(t.n_domains, 1);
    assert_string_equal(t.source, "unknown");
    int pos[PK_TOPO_MAX_GPUS];
    assert_int_equal(pk_gpu_topology_largest_domain(&t, pos), 4);
}

static void test_gpu_split_by_local_rank(void **state) {
    (void)state;
    pk_gpu_topology t;
    make_topology(&t, 8, 8); /* one NVSwitch domain */
    int out[PK_TOPO_MAX_GPUS], n;
    char note[512];
    pk_error err;
    pk_launch_env e = local(1, 2, "");
    assert_int_equal(pk_launch_pick_gpus(&t, NULL, &e, out, &n, note, sizeof note, &err), PK_OK);
    assert_int_equal(n, 4);
    for (int i = 0; i < 4; i++)
        assert_int_equal(out[i], 4 + i);
    assert_non_null(strstr(note, "local rank 1 of 2"));
    /* 3 workers on 8 GPUs: 2, 3, 3 and no GPU twice. */
    int seen[8] = {0}, total = 0;
    for (int r = 0; r < 3; r++) {
        e = local(r, 3, "");
        assert_int_equal(pk_launch_pick_gpus(&t, "auto", &e, out, &n, note, sizeof note, &err),
                         PK_OK);
        for (int i = 0; i < n; i++)
            seen[out[i]]++;
        total += n;
    }
    assert_int_equal(total, 8);
    for (int i = 0; i < 8; i++)
        assert_int_equal(seen[i], 1);
    /* More workers than GPUs on a CPU host: none of them gets a GPU. */
    pk_gpu_topology none;
    memset(&none, 0, sizeof none);
    e = local(2, 3, "");
    assert_int_equal(pk_launch_pick_gpus(&none, NULL, &e, out, &n, note, sizeof note, &err), PK_OK);
    assert_int_equal(n, 0);
}

static void test_gpu_choice_stays_in_one_domain(void **state) {
    (void)state;
    pk_gpu_topology t;
    make_topology(&t, 8, 4); /* two NVLink islands of 4 */
    int out[PK_TOPO_MAX_GPUS], n;
    char note[512];
    pk_error err;
    pk_launch_env e = local(0, 1, "");
    assert_int_equal(pk_launch_pick_gpus(&t, NULL, &e, out, &n, note, sizeof note, &err), PK_OK);
    assert_int_equal(n, 4);
    for (int i = 0; i < 4; i++)
        assert_int_equal(out[i], i);
    assert_non_null(strstr(note, "2 NVLink domains"));
    /* Explicit lists too: a job's W GPUs must come from one domain. */
    assert_int_equal(pk_launch_pick_gpus(&t, "3,4,5", &e, out, &n, note, sizeof note, &err), PK_OK);
    assert_int_equal(n, 2);
    assert_int_equal(out[0], 4);
    assert_int_equal(out[1], 5);
}

static void test_gpu_lists(void **state) {
    (void)state;
    pk_gpu_topology t;
    make_topology(&t, 8, 8);
    int out[PK_TOPO_MAX_GPUS], n;
    char note[512];
    pk_error err;
    pk_launch_env e = local(0, 4, "GPU-0006,GPU-0002");
    /* The launcher's CUDA_VISIBLE_DEVICES wins over the local-rank split. */
    assert_int_equal(pk_launch_pick_gpus(&t, NULL, &e, out, &n, note, sizeof note, &err), PK_OK);
    assert_int_equal(n, 2);
    assert_int_equal(out[0], 6);
    assert_int_equal(out[1], 2);
    assert_int_equal(pk_launch_pick_gpus(&t, "none", &e, out, &n, note, sizeof note, &err), PK_OK);
    assert_int_equal(n, 0);
    assert_int_equal(pk_launch_pick_gpus(&t, "1,9", &e, out, &n, note, sizeof note, &err),
                     PK_ERR_INVALID);
    assert_non_null(strstr(err.message, "'9' does not exist"));
    assert_int_equal(pk_launch_pick_gpus(&t, "1,x", &e, out, &n, note, sizeof note, &err),
                     PK_ERR_INVALID);
    e = local(0, 1, "GPU-ffff");
    assert_int_equal(pk_launch_pick_gpus(&t, NULL, &e, out, &n, note, sizeof note, &err),
                     PK_ERR_INVALID);
    assert_non_null(strstr(err.message, "CUDA_VISIBLE_DEVICES"));
}

static char *fixture(const char *name) {
    char path[512], *text = NULL;
    snprintf(path, sizeof path, "%s/%s", PK_TEST_FIXTURES, name);
    pk_error err;
    assert_int_equal(pk_read_file(path, &text, NULL, &err), PK_OK);
    return text;
}

static void test_parse_nvidia_smi_topo(void **state) {
    (void)state;
    unsigned char links[PK_TOPO_MAX_GPUS * PK_TOPO_MAX_GPUS];
    int domain[PK_TOPO_MAX_GPUS], nd;
    char *text = fixture("topo-h200x2.txt");
    assert_int_equal(pk_gpu_topology_parse_smi(text, links, PK_TOPO_MAX_GPUS), 2);
    assert_true(links[0 * 2 + 1] && links[1 * 2 + 0] && !links[0] && !links[3]);
    pk_gpu_domains_from_links(2, links, domain, &nd);
    assert_int_equal(nd, 1);
    free(text);

    text = fixture("topo-2x2-nic.txt"); /* NIC columns and rows are not GPUs */
    assert_int_equal(pk_gpu_topology_parse_smi(text, links, PK_TOPO_MAX_GPUS), 4);
    pk_gpu_domains_from_links(4, links, domain, &nd);
    assert_int_equal(nd, 2);
    assert_int_equal(domain[0], domain[1]);
    assert_int_equal(domain[2], domain[3]);
    assert_int_not_equal(domain[0], domain[2]);
    free(text);

    text = fixture("topo-pcie.txt"); /* PCIe only: every GPU alone */
    assert_int_equal(pk_gpu_topology_parse_smi(text, links, PK_TOPO_MAX_GPUS), 2);
    pk_gpu_domains_from_links(2, links, domain, &nd);
    assert_int_equal(nd, 2);
    free(text);

    assert_int_equal(pk_gpu_topology_parse_smi("No devices were found\n", links, 8), -1);
}

/* The driver's list decides each GPU's index (PCI bus order) and node minor, matched by UUID:
 * the sandbox binds a granted index through the same list. */
static void test_driver_indices_and_minors(void **state) {
    (void)state;
    pk_gpu_topology t;
    make_topology(&t, 4, 4);
    pk_gpu_nodes nodes;
    memset(&nodes, 0, sizeof nodes);
    nodes.n = 4;
    /* NVML listed GPU-0000..3 as 0..3; the driver's PCI order is 2, 0, 3, 1 with minors 3..0;
     * GPU-0003 is absent from the driver's list (it keeps NVML's index). */
    const char *order[4] = {"GPU-0002", "GPU-0000", "GPU-9999", "GPU-0001"};
    for (int k = 0; k < 4; k++) {
        snprintf(nodes.gpu[k].uuid, sizeof nodes.gpu[k].uuid, "%s", order[k]);
        nodes.gpu[k].minor = 3 - k;
    }
    for (int i = 0; i < 4; i++)
        t.gpus[i].minor = -1;
    pk_gpu_topology_apply_driver(&t, &nodes);
    assert_int_equal(t.gpus[0].index, 1);
    assert_int_equal(t.gpus[0].minor, 2);
    assert_int_equal(t.gpus[1].index, 3);
    assert_int_equal(t.gpus[1].minor, 0);
    assert_int_equal(t.gpus[2].index, 0);
    assert_int_equal(t.gpus[2].minor, 3);
    assert_int_equal(t.gpus[3].index, 3 /* NVML's */);
    assert_int_equal(t.gpus[3].minor, -1);
}

static void test_scrub(void **state) {
    (void)state;
    setenv("OMPI_COMM_WORLD_RANK", "1", 1);
    setenv("PMIX_RANK", "1", 1);
    setenv("SLURM_PROCID", "1", 1);
    setenv("PKGYM_KEEP_ME", "1", 1);
    pk_launch_env_scrub();
    assert_null(getenv("OMPI_COMM_WORLD_RANK"));
    assert_null(getenv("PMIX_RANK"));
    assert_null(getenv("SLURM_PROCID"));
    assert_string_equal(getenv("PKGYM_KEEP_ME"), "1");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mpirun_env),
        cmocka_unit_test(test_srun_env),
        cmocka_unit_test(test_no_launcher),
        cmocka_unit_test(test_domains),
        cmocka_unit_test(test_domains_without_nvlink),
        cmocka_unit_test(test_gpu_split_by_local_rank),
        cmocka_unit_test(test_gpu_choice_stays_in_one_domain),
        cmocka_unit_test(test_gpu_lists),
        cmocka_unit_test(test_parse_nvidia_smi_topo),
        cmocka_unit_test(test_driver_indices_and_minors),
        cmocka_unit_test(test_scrub),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
