"""primitives/sumsq_allreduce is not a PKB problem: the independent implementation is plain
PyTorch, summing each row sequentially in the problem's accumulation dtype (fp32; a cumulative
sum, the least favourable honest order), then torch.distributed's all-reduce
(adapters/_sumsq_allreduce.py)."""
from _sumsq_allreduce import run  # noqa: F401

PKB_REFERENCE = None
