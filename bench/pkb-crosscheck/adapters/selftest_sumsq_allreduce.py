"""selftest/sumsq_allreduce (the host twin of primitives/sumsq_allreduce) is not a PKB problem:
its independent implementation is the primitive's (adapters/_sumsq_allreduce.py)."""
from _sumsq_allreduce import run  # noqa: F401

PKB_REFERENCE = None
