"""CPU tests that the process holds one FAISS (docs/one-faiss.md): FAISS's
globals changed through `import faiss` are seen by faiss_ext's C++ code and
the other way round, objects made on one side are the other side's objects,
and our extension cannot load without the FAISS of `import faiss` (it holds
no FAISS of its own)."""

import os
import subprocess
import sys

import faiss
import numpy as np
import pytest

import faiss_ext
from faiss_ext import _faiss_ext_testing as testing


@pytest.fixture
def restore_ivf_stats():
    before = faiss.cvar.indexIVF_stats.nq
    yield
    faiss.cvar.indexIVF_stats.nq = before


def test_faiss_global_set_in_python_is_seen_by_our_cpp(restore_ivf_stats):
    for value in (12345, 777):
        faiss.cvar.indexIVF_stats.nq = value
        assert testing.faiss_globals()["indexIVF_stats_nq"] == value


def test_faiss_global_set_by_our_cpp_is_seen_in_python(restore_ivf_stats):
    testing.set_indexIVF_stats_nq(4242)
    assert faiss.cvar.indexIVF_stats.nq == 4242


def test_faiss_global_is_one_object():
    # the C++ address of faiss::indexIVF_stats, as faiss's SWIG proxy holds it
    # and as our code takes it
    assert int(faiss.cvar.indexIVF_stats.this) == testing.faiss_globals()["indexIVF_stats_address"]


def test_faiss_search_counters_count_our_searches(restore_ivf_stats):
    # FAISS's IVF code, run from Python, updates the counters our C++ reads
    rng = np.random.default_rng(0)
    xb = rng.random((2000, 8), dtype=np.float32)
    ivf = faiss.index_factory(8, "IVF16,Flat")
    ivf.train(xb)
    ivf.add(xb)
    faiss.cvar.indexIVF_stats.reset()
    ivf.search(xb[:25], 3)
    assert faiss.cvar.indexIVF_stats.nq == 25
    assert testing.faiss_globals()["indexIVF_stats_nq"] == 25


def test_distance_threshold_global_is_shared():
    before = faiss.cvar.distance_compute_blas_threshold
    try:
        faiss.cvar.distance_compute_blas_threshold = before + 11
        assert testing.faiss_globals()["distance_compute_blas_threshold"] == before + 11
    finally:
        faiss.cvar.distance_compute_blas_threshold = before


def test_omp_threads_set_through_faiss_are_ours():
    before = faiss.omp_get_max_threads()
    try:
        faiss.omp_set_num_threads(1)
        assert testing.faiss_globals()["omp_max_threads"] == 1
    finally:
        faiss.omp_set_num_threads(before)


def test_faiss_objects_are_our_cpp_objects(rng):
    flat = faiss.IndexFlatL2(8)
    flat.add(rng.random((10, 8), dtype=np.float32))
    assert testing.index_address(flat) == int(flat.this)
    assert testing.index_type_name(flat) == "faiss::IndexFlatL2"
    # our writer on FAISS's object writes what FAISS writes
    np.testing.assert_array_equal(faiss_ext.serialize_index(flat), faiss.serialize_index(flat))


def _run_python(code):
    env = dict(os.environ)
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=120)


def test_import_order_does_not_matter():
    # faiss_ext first: it imports faiss itself, and the globals are shared
    done = _run_python(
        "import faiss_ext\n"
        "from faiss_ext import _faiss_ext_testing as t\n"
        "import faiss\n"
        "faiss.cvar.indexIVF_stats.nq = 31337\n"
        "assert t.faiss_globals()['indexIVF_stats_nq'] == 31337\n"
        "print('shared')\n")
    assert done.returncode == 0, done.stderr
    assert "shared" in done.stdout


def test_our_extension_has_no_faiss_of_its_own():
    # Loaded without the FAISS of `import faiss` made global, our extension
    # cannot resolve FAISS's symbols: it and libfaiss_ext hold no FAISS.
    path = os.path.dirname(faiss_ext._faiss_ext.__file__)
    done = _run_python(
        "import importlib.util, sys\n"
        "spec = importlib.util.spec_from_file_location('_faiss_ext', %r)\n"
        "module = importlib.util.module_from_spec(spec)\n"
        "spec.loader.exec_module(module)\n" % os.path.join(
            path, os.path.basename(faiss_ext._faiss_ext.__file__)))
    assert done.returncode != 0
    assert "undefined symbol" in done.stderr and "faiss" in done.stderr


def test_our_cpp_takes_only_faiss_indexes():
    # a SWIG proxy of another FAISS type is refused by the SWIG type check
    with pytest.raises(TypeError, match="must be a faiss.Index"):
        testing.index_address(faiss.PCAMatrix(8, 4))
    with pytest.raises(TypeError, match="must be a faiss.Index"):
        testing.index_address(np.zeros(3))


def test_factory_index_alive_at_exit_is_deleted_without_a_swig_leak_message(tmp_path):
    """A factory index in a module global printed "swig/python detected a
    memory leak of type 'faiss::IndexFlat *', no destructor found." at
    interpreter exit (issue 37): our owning proxies did not hold FAISS's SWIG
    type table, which went first. Several kinds, wrapped and not."""
    (tmp_path / "holder.py").write_text(
        "import faiss, faiss_ext, numpy as np\n"
        "FLAT = faiss_ext.index_factory(8, 'QSFlat')\n"
        "IDMAP = faiss_ext.index_factory(8, 'IDMap,QSFlat')\n"
        "GNND = faiss_ext.index_factory(8, 'GNND16')\n"
        "COSINE = faiss_ext.index_factory(8, 'QSFlatCosine')\n"
        "FLAT.add(np.ones((5, 8), dtype=np.float32))\n")
    env = dict(os.environ)
    env["PYTHONPATH"] = str(tmp_path) + os.pathsep + env.get("PYTHONPATH", "")
    run = subprocess.run([sys.executable, "-c", "import faiss, holder; print(holder.FLAT.ntotal)"],
                         capture_output=True, text=True, env=env, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.split()[0] == "5"
    assert "memory leak" not in run.stdout + run.stderr, run.stdout + run.stderr
