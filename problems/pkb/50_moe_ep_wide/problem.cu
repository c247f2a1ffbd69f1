// pkb/50_moe_ep_wide (ParallelKernelBench problem 50): the expert-parallel MoE forward with two
// experts per rank (E = 2 W, K = 2; expert e on rank e / 2). Every rank routes its own M tokens
// with its own router (softmax of x gate_weight^T + gate_bias, top-2), sends each token to the
// ranks of its two experts (both may be on one rank), runs its MLP (N -> I -> N, SiLU-gated,
// the rank's weights: PKB applies it to every row the rank received, for either of its experts)
// on the received rows, reordered by local expert as PKB's _sort_chunks_by_idxs does, sends the
// rows back and combines them with the routing weights:
//   out[m] = sum over m's two experts e of p_e(m) * MLP_rank(e)(x[m])       (M x N bf16)
// The module is shared with pkb/49 and 51 (problems/include/pk_moe_ep_ref.cuh).
#include "pk_moe_ep_ref.cuh"

extern "C" const pk_problem_module *pk_problem_module_v1(void) {
    return pk_moe_ep_module();
}
