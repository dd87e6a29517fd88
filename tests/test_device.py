"""gemm.cuda.device on a machine without a GPU: what NVML is asked, with fakes for it."""
import sys


def _fake_nvml(monkeypatch):
    """A pynvml with two GPUs, told apart by PCI bus id (index 0 is 0000:00:06.0)."""
    import types
    uuids = {"0000:00:06.0": "GPU-aaaa", "0000:00:07.0": "GPU-bbbb"}
    nv = types.ModuleType("pynvml")
    nv.nvmlInit = lambda: None
    nv.nvmlDeviceGetHandleByPciBusId = lambda bus: bus.decode()
    nv.nvmlDeviceGetHandleByIndex = lambda i: sorted(uuids)[i]
    nv.nvmlDeviceGetUUID = lambda h: uuids[h]
    nv.nvmlDeviceGetName = lambda h: "NVIDIA H200"
    monkeypatch.setitem(sys.modules, "pynvml", nv)


def test_nvml_reads_the_visible_gpu_not_nvml_index_0(monkeypatch):
    """A process without a CUDA context (the gate's parent, gemm calibrate) on a lane that sees
    GPU 1 only (CUDA_VISIBLE_DEVICES=1) must name GPU 1: NVML's index 0 is GPU 0 whatever
    CUDA_VISIBLE_DEVICES says. Where the visible GPU cannot be found, nothing is named."""
    from gemm.cuda import device
    _fake_nvml(monkeypatch)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    monkeypatch.setattr(device, "_visible_bus_id", lambda: "0000:00:07.0")
    assert device.Clocks().identity() == "NVIDIA H200 GPU-bbbb"
    monkeypatch.setattr(device, "_visible_bus_id", lambda: None)
    assert device.Clocks().identity() is None
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert device.Clocks().identity() == "NVIDIA H200 GPU-aaaa"
