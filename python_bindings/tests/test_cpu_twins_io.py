"""CPU tests: faiss.write_index / faiss.read_index round trips of the CPU
twins FAISS knows (made by our factory: the very FAISS objects), pickling
(FAISS's for its classes, ours through faiss_ext's serialiser for our
IndexBiLevelLSH), and faiss_ext.write_index for what FAISS 1.7.3 cannot
write."""

import pickle

import faiss
import numpy as np
import pytest

import faiss_ext
from knn_check import clustered

D_DIM = 16
K = 8

#: Twins FAISS 1.7.3 writes and reads itself, alone and inside its wrappers.
FAISS_KNOWN = ["QSFlat", "QSFlatCosine", "GNND16", "SGraph16", "IDMap,QSFlat", "IDMap2,GNND16",
               "PCA8,SGraph16"]


@pytest.fixture(scope="module")
def data():
    xb = clustered(3, 1200, D_DIM)
    return xb, clustered(4, 30, D_DIM), np.arange(len(xb), dtype=np.int64) + 500


def _filled(description, data):
    xb, _, ids = data
    index = faiss_ext.index_factory(D_DIM, description)
    if not index.is_trained:
        index.train(xb)
    if description.startswith("IDMap"):
        index.add_with_ids(xb, ids)
    else:
        index.add(xb)
    return index


def _same_search(a, b, xq):
    for x, y in zip(a.search(xq, K), b.search(xq, K)):
        np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("description", FAISS_KNOWN)
def test_faiss_write_read_round_trip_of_twins(data, tmp_path, description):
    index = _filled(description, data)
    path = str(tmp_path / "twin.index")
    faiss.write_index(index, path)
    back = faiss.read_index(path)
    assert type(back).__name__ == type(faiss.downcast_index(index)).__name__
    assert back.ntotal == index.ntotal
    _same_search(index, back, data[1])
    # our reader reads FAISS's file, our writer writes FAISS's bytes
    _same_search(index, faiss_ext.read_index(path), data[1])
    np.testing.assert_array_equal(faiss_ext.serialize_index(index), faiss.serialize_index(index))


@pytest.mark.parametrize("description", FAISS_KNOWN)
def test_faiss_pickles_twins(data, description):
    index = _filled(description, data)
    back = pickle.loads(pickle.dumps(index))
    _same_search(index, back, data[1])


def test_our_index_pickles_through_our_serialiser(data):
    index = _filled("BiLSH6x6_t2", data)
    back = pickle.loads(pickle.dumps(index))
    assert isinstance(back, faiss_ext.IndexBiLevelLSH) and back is not index
    assert back.config == index.config and back.ntotal == index.ntotal
    _same_search(index, back, data[1])
    np.testing.assert_array_equal(faiss_ext.serialize_index(back),
                                  faiss_ext.serialize_index(index))


@pytest.mark.parametrize("description", ["BiLSH6x6_t2", "IDMap,BiLSH6x6_t2", "QSFlatPearson"])
def test_what_faiss_cannot_write_goes_through_faiss_ext(data, tmp_path, description):
    # FAISS 1.7.3 has no hook for foreign types: our IndexBiLevelLSH and the
    # Pearson twin's RowCenteringTransform are written by faiss_ext
    index = _filled(description, data)
    path = str(tmp_path / "ours.index")
    with pytest.raises(RuntimeError, match="serialize"):
        faiss.write_index(index, path)
    faiss_ext.write_index(index, path)
    back = faiss_ext.read_index(path)
    _same_search(index, back, data[1])
