"""Soft checks, for the tests that report every failed check rather than stop at the first:
check() prints and records a failure and returns cond; a test ends with
`return 1 if failures else 0`. No dependencies beyond the standard library, so GPU tests can
import it before they know whether they will skip."""
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)
    return cond


def close(a, b, rel=1e-9):
    """a and b equal to a relative tolerance (and both 0 counts as equal)."""
    return abs(a - b) <= rel * max(abs(a), abs(b), 1e-300)
