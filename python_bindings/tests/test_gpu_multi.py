"""index_cpu_to_gpu_multiple from Python: replicas and shards of
GpuIndexQuickSelectFlat give faiss.IndexFlat's results (ties aside), adds
go through, index_gpu_to_cpu gives back a faiss.IndexFlat equal to the input,
and bad arguments raise. The GPU tests run on devices [0, 1] (skipped, with
the reason, below 2 GPUs) and on GPU 0 listed twice (one GPU suffices); the
argument checks run without a GPU."""

import faiss
import numpy as np
import pytest

import faiss_ext
from knn_check import assert_knn_equal, clustered

NB, NQ, D_DIM, K = 3001, 40, 32, 10


def _devices_or_skip(devices):
    """Skips unless the GPUs in `devices` are visible."""
    have = faiss_ext.get_num_gpus()
    need = max(devices) + 1
    if have < need:
        pytest.skip("needs %d GPU%s for devices %s (%d visible)"
                    % (need, "s" if need > 1 else "", devices, have))
    return devices


DEVICE_LISTS = [
    pytest.param([0, 1], id="gpus01"),
    pytest.param([0, 0], id="gpu0twice"),
]


@pytest.fixture
def data():
    return clustered(1, NB, D_DIM), clustered(2, NQ, D_DIM)


def _resources(devices):
    """One StandardGpuResources per entry of `devices`."""
    return [faiss_ext.StandardGpuResources() for _ in devices]


# ---- argument errors (no GPU needed) ----

def test_argument_errors(data):
    xb, _ = data
    cpu = faiss.IndexFlatL2(D_DIM)
    cpu.add(xb)
    r0, r1 = faiss_ext.StandardGpuResources(), faiss_ext.StandardGpuResources()
    with pytest.raises(RuntimeError, match="2 resources providers for 1 devices"):
        faiss_ext.index_cpu_to_gpu_multiple([r0, r1], [0], cpu)
    with pytest.raises(RuntimeError, match="no devices"):
        faiss_ext.index_cpu_to_gpu_multiple([], [], cpu)
    with pytest.raises(RuntimeError, match="same object on the same device 0"):
        faiss_ext.index_cpu_to_gpu_multiple([r0, r0], [0, 0], cpu)
    with pytest.raises(TypeError, match="StandardGpuResources"):
        faiss_ext.index_cpu_to_gpu_multiple([r0, "r1"], [0, 1], cpu)
    with pytest.raises(TypeError):
        faiss_ext.index_cpu_to_gpu_multiple([r0, r1], [0, 1], "not an index")
    # k-NN graphs and FAISS's CPU-only indexes cannot be sharded
    nnd = faiss_ext.index_factory(D_DIM, "GNND16")
    with pytest.raises(RuntimeError, match="cannot be sharded"):
        faiss_ext.index_cpu_to_gpu_multiple([r0, r1], [0, 1], nnd, shard=True)
    with pytest.raises(RuntimeError, match="cannot be sharded"):
        faiss_ext.index_cpu_to_gpu_multiple([r0, r1], [0, 1], faiss.IndexHNSWFlat(D_DIM, 8),
                                            shard=True)
    # a device that does not exist
    with pytest.raises(RuntimeError):
        faiss_ext.index_cpu_to_gpu_multiple([r0, r1], [0, faiss_ext.get_num_gpus()], cpu)


def test_options():
    o = faiss_ext.GpuMultipleClonerOptions()
    assert o.shard is False and o.requireGpu is False
    o = faiss_ext.GpuMultipleClonerOptions(shard=True, requireGpu=True)
    assert o.shard and o.requireGpu
    assert isinstance(o, faiss_ext.GpuClonerOptions)


# ---- on GPUs ----

@pytest.mark.gpu
@pytest.mark.parametrize("devices", DEVICE_LISTS)
@pytest.mark.parametrize("shard", [False, True])
@pytest.mark.parametrize("metric", [faiss.METRIC_L2, faiss.METRIC_INNER_PRODUCT])
def test_flat_search_and_round_trip(devices, shard, metric, data):
    devices = _devices_or_skip(devices)
    xb, xq = data
    cpu = faiss.IndexFlat(D_DIM, metric)
    cpu.add(xb)
    res = _resources(devices)
    multi = faiss_ext.index_cpu_to_gpu_multiple(res, devices, cpu, shard=shard)
    del res  # the index keeps its resources alive
    assert multi.ntotal == NB
    assert isinstance(multi, faiss.IndexShards if shard else faiss.IndexReplicas)
    l2 = metric == faiss.METRIC_L2
    for k in (1, K, 100):
        D_ref, I_ref = cpu.search(xq, k)
        D, I = multi.search(xq, k)
        assert_knn_equal(D, I, D_ref, I_ref, xq, xb, l2)
    back = faiss_ext.index_gpu_to_cpu(multi)
    assert isinstance(back, faiss.IndexFlat), type(back)
    assert back.ntotal == NB and back.metric_type == metric
    np.testing.assert_array_equal(back.reconstruct_n(0, NB), xb)
    faiss.write_index(back, "/dev/null")


@pytest.mark.gpu
@pytest.mark.parametrize("devices", DEVICE_LISTS)
def test_sharded_idmap_adds(devices, data):
    devices = _devices_or_skip(devices)
    xb, xq = data
    ids = np.arange(NB, dtype=np.int64) * 5 + 77
    cpu = faiss.IndexIDMap(faiss.IndexFlatL2(D_DIM))
    cpu.add_with_ids(xb[:2000], ids[:2000])
    multi = faiss_ext.index_cpu_to_gpu_multiple(_resources(devices), devices, cpu, shard=True)
    multi.add_with_ids(xb[2000:], ids[2000:])
    cpu.add_with_ids(xb[2000:], ids[2000:])
    assert multi.ntotal == cpu.ntotal == NB
    D_ref, I_ref = cpu.search(xq, K)
    D, I = multi.search(xq, K)
    np.testing.assert_allclose(D, D_ref, rtol=1e-4, atol=1e-4)
    # ids agree except between vectors at the same distance
    same = (I == I_ref) | np.isclose(D, D_ref, rtol=1e-4, atol=1e-4)
    assert same.all()
    back = faiss_ext.index_gpu_to_cpu(multi)
    assert isinstance(back, faiss.IndexIDMap), type(back)
    assert sorted(faiss.vector_to_array(back.id_map)) == sorted(ids)


@pytest.mark.gpu
@pytest.mark.parametrize("devices", DEVICE_LISTS)
def test_replicated_add(devices, data):
    devices = _devices_or_skip(devices)
    xb, xq = data
    cpu = faiss.IndexFlatL2(D_DIM)
    cpu.add(xb[:1000])
    opts = faiss_ext.GpuMultipleClonerOptions()
    multi = faiss_ext.index_cpu_to_gpu_multiple(_resources(devices), devices, cpu, opts)
    multi.add(xb[1000:])
    cpu.add(xb[1000:])
    D_ref, I_ref = cpu.search(xq, K)
    D, I = multi.search(xq, K)
    assert_knn_equal(D, I, D_ref, I_ref, xq, xb, True)


@pytest.mark.gpu
def test_one_device_is_index_cpu_to_gpu(data):
    xb, _ = data
    cpu = faiss.IndexFlatL2(D_DIM)
    cpu.add(xb)
    g = faiss_ext.index_cpu_to_gpu_multiple([faiss_ext.StandardGpuResources()], [0], cpu,
                                            shard=True)
    assert isinstance(g, faiss_ext.GpuIndexQuickSelectFlat)
