// pkb/49_moe_ep_balanced (ParallelKernelBench problem 49): the expert-parallel MoE forward with
// one expert per rank (E = W, K = 2). Every rank routes its own M tokens with its own router
// (softmax of x gate_weight^T + gate_bias, top-2), sends each token to the ranks of its two
// experts, runs its expert (a SiLU-gated MLP N -> I -> N with the rank's weights) on every row it
// received, sends the rows back and combines them with the routing weights:
//   out[m] = sum over m's two experts e of p_e(m) * MLP_e(x[m])       (M x N bf16)
// The module is shared with pkb/50 and 51 (problems/include/pk_moe_ep_ref.cuh): the reference
// (cuBLASLt linears, host-driven NCCL, PyTorch's op order and roundings), the generator (router
// per routing mode, every rank's expert weights) and the tie-aware checker. At W = 2, E = K = 2:
// every token goes to both experts (PKB's default); the routing decisions start at W = 4.
#include "pk_moe_ep_ref.cuh"

extern "C" const pk_problem_module *pk_problem_module_v1(void) {
    return pk_moe_ep_module();
}
