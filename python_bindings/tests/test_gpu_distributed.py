"""faiss_ext.distributed with GPU actors (issue 40): a local Ray cluster
whose one node declares the machine's GPU, shards sharing it by fractional
GPUs ({"num_gpus": 0.25}). Exact GPU shards equal one index; graph shards
reach the recall of one graph index; a GPU replica killed during searches is
replaced by its twin; a GNND k-NN graph built over four GPU actors (pair
merges scheduled on Ray) reaches the exact graph's neighbours. Skipped, visibly, without Ray or a GPU (on the GPU
machine Ray comes from scripts/device/make-ray-kit.sh)."""

import faiss
import numpy as np
import pytest

ray = pytest.importorskip("ray", reason="Ray is not installed: pip install 'ray>=2'")
from ray.cluster_utils import Cluster  # noqa: E402

import faiss_ext  # noqa: E402
from faiss_ext import distributed  # noqa: E402
from test_cpu_distributed import assert_knn_equal, kill_and_wait, reference  # noqa: E402

pytestmark = pytest.mark.skipif(faiss_ext.get_num_gpus() == 0, reason="no GPU on this machine")

D_DIM = 16
QUARTER = {"num_gpus": 0.25, "num_cpus": 0.5}


@pytest.fixture(scope="module")
def cluster():
    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 4, "num_gpus": 1})
    ray.init(address=c.address, include_dashboard=False, log_to_driver=False)
    yield c
    ray.shutdown()
    c.shutdown()


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(23)
    return rng.random((20000, D_DIM), dtype=np.float32), rng.random((200, D_DIM), dtype=np.float32)


def test_exact_gpu_shards_equal_one_index(cluster, data):
    xb, xq = data
    index = distributed.ShardedIndex(D_DIM, "QSFlat", n_shards=4, actor_options=QUARTER)
    assert [[p["on_gpu"] for p in s] for s in index.placements()] == [[True]] * 4
    index.add(xb)
    D, I = index.search(xq, 10)
    refD, refI = reference(xb, np.arange(len(xb)), xq, 10)
    assert_knn_equal(D, I, refD, refI)
    # filters and deletes pass through to the GPU shards
    D, I = index.search(xq, 10, sel=(0, 5000))
    assert ((I >= 0) & (I < 5000)).all()
    assert index.remove_ids((0, 1000)) == 1000
    D, I = index.search(xq, 10)
    assert (I >= 1000).all()


def test_graph_shards_reach_the_recall_of_one_graph(cluster, data):
    xb, xq = data
    index = distributed.ShardedIndex(D_DIM, "SGraph32", n_shards=2, actor_options=QUARTER)
    index.add(xb)
    _, I = index.search(xq, 10)
    _, refI = reference(xb, np.arange(len(xb)), xq, 10)
    recall = np.mean([len(set(a) & set(b)) / 10.0 for a, b in zip(I, refI)])
    assert recall >= 0.95, recall


def test_a_killed_gpu_replica_is_replaced_by_its_twin(cluster, data):
    xb, xq = data
    index = distributed.ShardedIndex(D_DIM, "QSFlat", n_shards=2, replicas=2, actor_options=QUARTER)
    index.add(xb)
    before = index.search(xq, 10)
    kill_and_wait(index.shards[0][0])
    after = index.search(xq, 10)          # the shard's other replica answers
    np.testing.assert_array_equal(after[1], before[1])
    assert index.heal() == 1
    assert [[p["on_gpu"] for p in s] for s in index.placements()] == [[True, True]] * 2


def test_gnnd_graph_over_gpu_shards_reaches_the_exact_graph(cluster, data):
    # Four parts on four quarter-GPU actors: GNND per part, then a GGM merge
    # of every pair in three rounds; recall@16 against the exact graph.
    from test_cpu_distributed import exact_graph
    x = data[0]
    parts = [x[i * 5000:(i + 1) * 5000] for i in range(4)]
    g = distributed.build_knn_graph(parts, 16, use_gpu=True, actor_options=QUARTER)
    assert all(p["on_gpu"] for p in g.placements())
    D, I = g.gather()
    _, refI = exact_graph(x, 16, faiss.METRIC_L2)
    recall = np.mean([len(set(a) & set(b)) / 16.0 for a, b in zip(I, refI)])
    assert recall >= 0.95, recall
    assert (I != np.arange(len(x))[:, None]).all(), "a row lists itself"
    assert (np.diff(D, axis=1) >= 0).all(), "lists not sorted closest first"
