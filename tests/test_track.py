"""The asv side without a GPU: what the track_ methods return, and what `record` accepts."""
import json

import pytest

from gemm import track


def rec(kernel, size, status="ok", k=(0.002, 0.002, 0.0021), b=(0.001, 0.001, 0.001)):
    r = {"kernel": kernel, "size": size, "flops": 2 * 1000**3, "status": status,
         "baseline": "cublas_fp32", "error": None if status == "ok" else "boom"}
    if status == "ok":
        r["kernel_time"] = {"samples_s": list(k)}
        r["baseline_time"] = {"samples_s": list(b)}
    return r


CACHE = {"records": [rec("05", "1000"), rec("04", "1000", status="wrong"),
                     rec("03", "1000", b=(0.0005, 0.0005, 0.0005))]}


def test_samples_protocol():
    out = track.samples_for(CACHE, "tflops", "05", "1000")
    assert out["number"] == 1 and out["samples"][0] == pytest.approx(1.0)
    pct = track.samples_for(CACHE, "pct_of_cublas", "05", "1000")["samples"]
    assert pct[0] == pytest.approx(50.0)
    ratio = track.samples_for(CACHE, "time_ratio", "05", "1000")["samples"]
    assert ratio[0] == pytest.approx(2.0)
    assert track.samples_for(CACHE, "seconds", "05", "1000")["samples"][2] == 0.0021


def test_failed_kernels_fail_and_missing_ones_skip():
    with pytest.raises(RuntimeError, match="wrong: boom"):
        track.samples_for(CACHE, "tflops", "04", "1000")
    with pytest.raises(NotImplementedError):  # asv records a skip (NaN)
        track.samples_for(CACHE, "tflops", "09", "1000")


def test_cublas_pooled_over_kernels():
    out = track.baseline_samples_for(CACHE, "seconds", "cublas_fp32", "1000")["samples"]
    assert len(out) == 6  # 05's and 03's interleaved measurements (04 failed before timing)
    with pytest.raises(RuntimeError):
        track.baseline_samples_for(CACHE, "tflops", "cublas_tf32", "1000")


def test_suite_covers_the_registry():
    import benchmarks.bench_gemm as suite
    from gemm import registry
    assert suite.Kernels.params == [registry.names(), track.SIZES]
    assert "1000" in track.SIZES and "8192" in track.SIZES
    assert suite.Kernels.setup_cache is suite.Cublas.setup_cache  # one sweep per commit


def test_result_file_validation(tmp_path):
    p = tmp_path / "r.json"
    p.write_text("{oops")
    with pytest.raises(track.RecordError, match="not readable"):
        track.validate_result_file(p)
    base = {"version": 2, "commit_hash": "ab" * 20, "result_columns": ["result", "params"]}
    p.write_text(json.dumps({**base, "results": {"x": [[None, None], []]}}))
    with pytest.raises(track.RecordError, match="every benchmark failed"):
        track.validate_result_file(p)
    p.write_text(json.dumps({**base, "results": {"x": [[None, 3.5], []]}}))
    assert track.validate_result_file(p)["commit_hash"] == "ab" * 20


def test_sweep_refuses_without_a_gpu(monkeypatch):
    import gemm.device
    monkeypatch.setattr(gemm.device, "probe", lambda: (False, "no driver"))
    with pytest.raises(gemm.device.GPUUnavailable, match="needs a CUDA GPU: no driver"):
        track.asv_sweep()
