import os
import shutil

import pytest


@pytest.fixture(scope="session")
def gpu():
    """Skips the test, with the reason, where no CUDA GPU is usable."""
    from gemm.device import available
    ok, why = available()
    if not ok:
        pytest.skip(f"no GPU: {why}")
    return True


@pytest.fixture(scope="session")
def nvcc():
    path = shutil.which("nvcc")
    if not path:
        pytest.skip("nvcc is not on the PATH")
    return path


def pytest_collection_modifyitems(config, items):
    for item in items:
        if "gpu" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.gpu)
