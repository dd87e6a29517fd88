import shutil

import pytest

from gemm.testing import gpu  # noqa: F401  (the shared `gpu` fixture)


@pytest.fixture(scope="session")
def nvcc():
    path = shutil.which("nvcc")
    if not path:
        pytest.skip("nvcc is not on the PATH")
    return path


@pytest.fixture(scope="module")
def tools():
    """nvcc and cuobjdump as gemm explain finds them (skips where they are missing)."""
    from gemm.explain import build
    try:
        return build.find_tools()
    except build.ExplainError as exc:
        pytest.skip(str(exc))


@pytest.fixture
def gpu_here(monkeypatch):
    """The gate's A/B believes a GPU is present (the stand-in packages measure instead)."""
    import gemm.track.confirm
    monkeypatch.setattr(gemm.track.confirm, "gpu_present", lambda: (True, ""))


def pytest_collection_modifyitems(config, items):
    for item in items:
        if "gpu" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.gpu)


@pytest.fixture(autouse=True)
def no_compile_guess(monkeypatch):
    """The A/B's stand-in arms build nothing: the planner's guess of an arm's first nvcc builds
    (gemm.track.plan.COMPILE_S) is the GPU machine's, and tests/test_plan.py tests it alone."""
    import gemm.track.plan
    monkeypatch.setattr(gemm.track.plan, "COMPILE_S", 0.0)
