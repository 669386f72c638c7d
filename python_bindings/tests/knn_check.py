"""Data and checks shared by the faiss_ext Python tests."""

import numpy as np


def random_data(rng, n, d):
    """n x d float32 vectors, uniform in [0, 1)."""
    return rng.random((n, d), dtype=np.float32)


def clustered(seed, n, d, clusters=50):
    """n x d float32 vectors around `clusters` random centres (like real
    data); the centres are the same for every seed, so queries (another seed)
    come from the base vectors' distribution."""
    centres = np.random.default_rng(12345).normal(0, 4, (clusters, d))
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, clusters, n)
    return (centres[labels] + rng.normal(0, 1, (n, d))).astype(np.float32)


def recall_at(I, I_ref):
    """Mean |I & I_ref| / k over the rows (k: I_ref's columns)."""
    k = I_ref.shape[1]
    return float(np.mean([len(np.intersect1d(a, b)) / k for a, b in zip(I, I_ref)]))


def normalize_rows(x):
    """Rows scaled to unit L2 norm (zero rows stay zero), float32."""
    x = np.asarray(x, dtype=np.float64)
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    norms[norms == 0] = 1
    return (x / norms).astype(np.float32)


def center_rows(x):
    """Rows minus their own mean, float32 (Pearson's preparation before normalising)."""
    x = np.asarray(x, dtype=np.float64)
    return (x - x.mean(axis=1, keepdims=True)).astype(np.float32)


def exact_scores(xq, xb, metric_is_l2):
    """Exact nq x nb distances (L2, squared) or inner products, in float64."""
    xq = xq.astype(np.float64)
    xb = xb.astype(np.float64)
    if metric_is_l2:
        return ((xq ** 2).sum(1)[:, None] + (xb ** 2).sum(1)[None, :] - 2 * xq @ xb.T)
    return xq @ xb.T


def assert_knn_equal(D, I, D_ref, I_ref, xq, xb, metric_is_l2, rtol=1e-4, atol=1e-4):
    """Checks a k-NN result against a reference (faiss.IndexFlat), up to ties.

    Shapes and padding (-1 ids past ntotal) must match exactly; each returned
    id must be a distinct stored vector whose exact distance is the reported
    one; the reported distances must equal the reference's, so the ids can
    differ only between vectors at the same distance.
    """
    assert D.shape == D_ref.shape and I.shape == I_ref.shape, (D.shape, D_ref.shape)
    assert D.dtype == np.float32 and I.dtype == np.int64
    nb = xb.shape[0]
    k_valid = min(I.shape[1], nb)
    np.testing.assert_array_equal(I[:, k_valid:], -1)
    np.testing.assert_array_equal(I_ref[:, k_valid:], -1)
    # Padding distances are +-inf (ours) or +-FLT_MAX (FAISS): "not a distance".
    assert np.all(np.abs(D[:, k_valid:]) >= np.finfo(np.float32).max)
    Iv, Dv = I[:, :k_valid], D[:, :k_valid]
    assert np.all((Iv >= 0) & (Iv < nb)), "ids out of range"
    for row in Iv:
        assert len(set(row.tolist())) == len(row), "duplicate ids in a row: %s" % row
    scores = exact_scores(xq, xb, metric_is_l2)
    claimed = np.take_along_axis(scores, Iv, axis=1)
    scale = max(1.0, float(np.abs(scores).max()))
    np.testing.assert_allclose(Dv, claimed, rtol=rtol, atol=atol * scale)
    np.testing.assert_allclose(Dv, D_ref[:, :k_valid], rtol=rtol, atol=atol * scale)
    # Sorted closest first.
    if metric_is_l2:
        assert np.all(np.diff(Dv, axis=1) >= -atol * scale)
    else:
        assert np.all(np.diff(Dv, axis=1) <= atol * scale)
