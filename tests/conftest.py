import shutil

import pytest

from gemm.testing import gpu  # noqa: F401  (the shared `gpu` fixture)


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
