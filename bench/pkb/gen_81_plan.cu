// Prints problem.cu's own make_plan / design_of / design_time digest for pkb/81 (host code only,
// no GPU), to diff against `sim_81_sam3_allgather_iou_suppression.py --plans`:
//   nvcc -std=c++17 -Iproblems/include -Icommon/include bench/pkb/gen_81_plan.cu \
//        -o /tmp/gen81 -lcublas -L<nccl lib> -lnccl && /tmp/gen81 > c.txt
//   python3 bench/pkb/sim_81_sam3_allgather_iou_suppression.py --plans | diff c.txt -
#include "../../problems/pkb/81_sam3_allgather_iou_suppression/problem.cu"

#include <stdio.h>

int main() {
    const int keys[] = {0, 1, 2, 3, 4, KEY_POST_TIMING, KEY_TIMED_BASE + 3};
    for (int W = 2; W <= 8; W *= 2)
        for (int ki = 0; ki < 7; ki++) {
            const plan p = make_plan(12345, keys[ki], W, 128);
            const long long T = p.start[W];
            printf("W=%d key=%d cls=%d ck=%llu T=%lld n=", W, keys[ki], p.cls,
                   (unsigned long long)p.ck, T);
            for (int q = 0; q < W; q++)
                printf("%lld,", p.n[q]);
            uint64_t h = 0;
            for (long long g = 0; g < T; g++) {
                const object_design d = design_of(p.ck, g, T, 65536);
                h = pk_splitmix64(h ^ d.mul ^ (d.add << 20) ^ ((uint64_t)d.lo << 40) ^
                                  ((uint64_t)d.hi << 50));
                h = pk_splitmix64(h ^ (uint64_t)(design_time(p.ck, g, T, p.cls) + 7));
            }
            printf(" h=%llu\n", (unsigned long long)h);
        }
    return 0;
}
