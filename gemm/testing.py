"""pytest helpers shared by tests/ and benchmarks/ (import the fixture into a conftest).

- `gpu`: skips a test, with the reason, where no CUDA GPU is usable. On a GPU runner set
  GEMM_REQUIRE_GPU=1 (ci/gate.sh does): then a missing GPU fails the test instead, so a
  runner that lost its GPU cannot pass the gate by skipping it.
- `cuda_synchronized`: a timer for pytest-benchmark that waits for the GPU before reading the
  clock (kernel launches return before the GPU has run them); benchmarks/conftest.py makes it
  the default there.
"""
import os
import time

import pytest

REQUIRE_GPU = "GEMM_REQUIRE_GPU"


@pytest.fixture(scope="session")
def gpu():
    from gemm.cuda.device import available
    ok, why = available()
    if not ok:
        if os.environ.get(REQUIRE_GPU, "") not in ("", "0"):
            pytest.fail(f"{REQUIRE_GPU} is set but no GPU is usable: {why}", pytrace=False)
        pytest.skip(f"no GPU: {why}")
    return True


def cuda_synchronized() -> float:
    from gemm.cuda.device import cuda
    cuda().Context.synchronize()
    return time.perf_counter()
