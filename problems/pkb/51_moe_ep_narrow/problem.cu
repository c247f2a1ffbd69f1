// pkb/51_moe_ep_narrow (ParallelKernelBench problem 51): the expert-parallel MoE forward with
// fewer experts than ranks (E = W / 2, PKB's largest E < W dividing W; K = min(2, E)): the ranks
// form W / E expert-parallel groups of E consecutive ranks (PKB's
// _resolve_ep_group_for_narrow_moe), and every exchange stays inside a group; expert e of a
// group lives on its e-th rank. Every rank routes its own M tokens with its own router, sends
// each token to its experts' ranks in its group, runs its MLP on the received rows, sends them
// back and combines them with the routing weights:
//   out[m] = sum over m's K experts e of p_e(m) * MLP_{first + e}(x[m])       (M x N bf16)
// At W = 2 (E = K = 1) every rank is its own group: out = MLP_rank(x), no exchange at all.
// The module is shared with pkb/49 and 50 (problems/include/pk_moe_ep_ref.cuh): its reference
// splits the communicator into the groups on its first call.
#include "pk_moe_ep_ref.cuh"

extern "C" const pk_problem_module *pk_problem_module_v1(void) {
    return pk_moe_ep_module();
}
