"""GPU tests: search and add of our GPU indexes take torch CUDA tensors and
CuPy arrays on the index's device (through __cuda_array_interface__, no host
round trip) and return the same kind on the same device; CPU torch tensors
come back as CPU tensors. Skipped, with the reason shown, without a GPU, and
without torch or CuPy."""

import faiss
import numpy as np
import pytest

import faiss_ext
from knn_check import clustered

pytestmark = pytest.mark.gpu

D_DIM = 32
K = 10


@pytest.fixture(scope="module")
def res():
    return faiss_ext.StandardGpuResources()


@pytest.fixture(scope="module")
def data():
    return clustered(5, 4000, D_DIM), clustered(6, 64, D_DIM)


@pytest.fixture(scope="module", params=["QSFlat", "BiLSH6x6_t2", "SGraph16"])
def index(request, res, data):
    """A GPU index of ours on device 0 holding xb (added from numpy)."""
    xb, _ = data
    twin = faiss_ext.index_factory(D_DIM, request.param)
    if not twin.is_trained:
        twin.train(xb)
    gpu = faiss_ext.index_cpu_to_gpu(res, 0, twin)
    gpu.add(xb)
    return gpu


def _device_libraries():
    libs = []
    try:
        import torch
        if torch.cuda.is_available():
            libs.append("torch")
    except ImportError:
        pass
    try:
        import cupy
        cupy.cuda.runtime.getDeviceCount()
        libs.append("cupy")
    except Exception:  # not installed, or no device for it
        pass
    return libs


def _to_device(lib, x):
    if lib == "torch":
        import torch
        return torch.from_numpy(np.ascontiguousarray(x)).cuda(0)
    import cupy
    with cupy.cuda.Device(0):
        return cupy.asarray(x)


def _to_numpy(lib, x):
    return x.cpu().numpy() if lib == "torch" else x.get()


@pytest.mark.parametrize("lib", ["torch", "cupy"])
def test_search_device_arrays_returns_the_same_kind(index, data, lib):
    if lib not in _device_libraries():
        pytest.skip("%s with CUDA is not installed here" % lib)
    _, xq = data
    D_ref, I_ref = index.search(xq, K)
    xq_dev = _to_device(lib, xq)
    D, I = index.search(xq_dev, K)
    assert type(D) is type(xq_dev) and type(I) is type(xq_dev)
    if lib == "torch":
        import torch
        assert D.device == xq_dev.device and D.dtype == torch.float32 and I.dtype == torch.int64
    else:
        import cupy
        assert D.device == xq_dev.device and D.dtype == cupy.float32 and I.dtype == cupy.int64
    np.testing.assert_array_equal(_to_numpy(lib, I), I_ref)
    np.testing.assert_allclose(_to_numpy(lib, D), D_ref, rtol=1e-5, atol=1e-5)
    # D= and I= on the device are filled in place
    D_out, I_out = _to_device(lib, np.empty_like(D_ref)), _to_device(lib, np.empty_like(I_ref))
    D2, I2 = index.search(xq_dev, K, D=D_out, I=I_out)
    assert D2 is D_out and I2 is I_out
    np.testing.assert_array_equal(_to_numpy(lib, I_out), I_ref)
    # float64 and non-contiguous device input are converted on the device
    wide = _to_device(lib, np.repeat(xq.astype(np.float64), 2, axis=1))
    _, I3 = index.search(wide[:, ::2], K)
    np.testing.assert_array_equal(_to_numpy(lib, I3), I_ref)


@pytest.mark.parametrize("lib", ["torch", "cupy"])
def test_add_device_arrays(res, data, lib):
    if lib not in _device_libraries():
        pytest.skip("%s with CUDA is not installed here" % lib)
    xb, xq = data
    from_host = faiss_ext.GpuIndexQuickSelectFlat(res, D_DIM, faiss.METRIC_L2)
    from_host.add(xb)
    from_device = faiss_ext.GpuIndexQuickSelectFlat(res, D_DIM, faiss.METRIC_L2)
    from_device.add(_to_device(lib, xb))
    assert from_device.ntotal == len(xb)
    for a, b in zip(from_host.search(xq, K), from_device.search(xq, K)):
        np.testing.assert_array_equal(a, b)


def test_device_arrays_are_checked(index, data):
    libs = _device_libraries()
    if not libs:
        pytest.skip("neither torch nor CuPy with CUDA is installed here")
    _, xq = data
    x = _to_device(libs[0], xq)
    with pytest.raises(ValueError, match="shape"):
        index.search(x[:, :5], K)
    with pytest.raises(ValueError, match="k must be > 0"):
        index.search(x, 0)
    with pytest.raises(ValueError, match="D must be"):
        index.search(x, K, D=_to_device(libs[0], np.empty((len(xq), K + 1), np.float32)))
    cpu_lsh = faiss_ext.index_factory(D_DIM, "BiLSH6x6_t2")
    with pytest.raises(ValueError, match="CPU index"):
        cpu_lsh.search(x, K)


def test_cpu_torch_tensors_come_back_as_cpu_tensors(index, data):
    torch = pytest.importorskip("torch")
    _, xq = data
    D_ref, I_ref = index.search(xq, K)
    D, I = index.search(torch.from_numpy(xq), K)
    assert isinstance(D, torch.Tensor) and not D.is_cuda
    np.testing.assert_array_equal(I.numpy(), I_ref)
