"""pytest helpers shared by tests/ and benchmarks/ (import the fixture into a conftest)."""
import pytest


@pytest.fixture(scope="session")
def gpu():
    """Skips the test, with the reason, where no CUDA GPU is usable."""
    from gemm.device import available
    ok, why = available()
    if not ok:
        pytest.skip(f"no GPU: {why}")
    return True
