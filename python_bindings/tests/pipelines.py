"""FAISS pipelines built in Python around one of our indexes, the mirror of
_faiss_ext_testing.search_pipeline (the same pipeline built in C++)."""

import faiss
import numpy as np

#: The FAISS wrappers the pipeline tests put around our indexes.
WRAPPERS = ["IDMap", "IDMap2", "Shards", "Replicas", "PCA8", "RefineFlat"]


def build_pipeline(wrapper, make_inner, d):
    """``wrapper`` (one of WRAPPERS) around indexes made by make_inner(d')
    with FAISS's Python classes, as search_pipeline does in C++ (Shards and
    Replicas hold two inner indexes; PCA<m> maps to m dimensions first;
    RefineFlat re-ranks with k_factor 2). Returns (pipeline, takes_ids)."""
    if wrapper in ("IDMap", "IDMap2"):
        cls = faiss.IndexIDMap if wrapper == "IDMap" else faiss.IndexIDMap2
        return cls(make_inner(d)), True
    if wrapper == "Shards":
        shards = faiss.IndexShards(d, False, True)  # not threaded, successive ids
        inners = [make_inner(d), make_inner(d)]
        for inner in inners:
            shards.add_shard(inner)
        shards.referenced_objects = inners  # FAISS's add_shard keeps no reference
        return shards, False
    if wrapper == "Replicas":
        replicas = faiss.IndexReplicas(d, False)
        inners = [make_inner(d), make_inner(d)]
        for inner in inners:
            replicas.addIndex(inner)
        replicas.referenced_objects = inners
        return replicas, False
    if wrapper.startswith("PCA"):
        m = int(wrapper[3:])
        return faiss.IndexPreTransform(faiss.PCAMatrix(d, m), make_inner(m)), False
    if wrapper == "RefineFlat":
        refine = faiss.IndexRefineFlat(make_inner(d))
        refine.k_factor = 2
        return refine, False
    raise ValueError(wrapper)


def search_python_pipeline(wrapper, make_inner, d, xt, xb, ids, xq, k):
    """Builds the pipeline in Python, trains it on xt, adds xb (with ids for
    the ID maps), searches xq: (D, I)."""
    pipeline, takes_ids = build_pipeline(wrapper, make_inner, d)
    if not pipeline.is_trained:
        pipeline.train(xt)
    if takes_ids:
        pipeline.add_with_ids(xb, ids)
    else:
        pipeline.add(xb)
    return pipeline.search(xq, k)


def assert_same_results(python_result, cpp_result):
    """The same neighbours and distances, bit for bit: both pipelines run the
    same FAISS and our same C++ code on the same data."""
    for a, b in zip(python_result, cpp_result):
        np.testing.assert_array_equal(a, b)


def metric_for(description, metric):
    """The metric argument for index_factory: left out (None) for the strings
    that name their own metric ("QSFlatCosine", "QSFlatPearson"), which refuse
    an explicit METRIC_L2."""
    if any(c.strip() in ("QSFlatCosine", "QSFlatPearson") for c in description.split(",")):
        return None
    return metric
