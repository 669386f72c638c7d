"""The crashes and silent wrong results of the second bad-input sweep (issue
21) on the Python side: each call must raise, leaving the index as it was, or
behave as docs/bad-inputs.md says. Calls that crashed the interpreter run in
a child interpreter (``_run``), so a crash fails one test, not the session.
The C++ side: tests/test_cpu_bad_inputs_twins.cpp and
tests/test_cpu_bad_inputs_factory_io.cpp."""

import os
import subprocess
import sys
import textwrap

import faiss
import numpy as np
import pytest

import faiss_ext


def _run(code, timeout=300):
    """Runs ``code`` in a child /usr/bin/python3 with this module path; returns
    (exit status, output). A crash is a negative status (the signal)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.path.dirname(os.path.dirname(faiss_ext.__file__)) + (
        os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    prelude = "import faiss, numpy as np, faiss_ext\n"
    p = subprocess.run([sys.executable, "-c", prelude + textwrap.dedent(code)], env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout)
    return p.returncode, p.stdout.decode(errors="replace")


def _expect_raises_in_child(code, exc, needle):
    """``code`` (in a child) must raise ``exc`` whose message holds ``needle``."""
    body = textwrap.indent(textwrap.dedent(code).strip("\n"), "    ")
    rc, out = _run("try:\n%s\nexcept %s as e:\n    assert %r in str(e), str(e)\n"
                   "    print('RAISED-OK')\n" % (body, exc, needle))
    assert rc == 0 and "RAISED-OK" in out, "exit status %d, output:\n%s" % (rc, out)


# ---- crashes ----

def test_r1_lsh_get_vectors_and_to_index_flat_while_another_thread_adds():
    # heap corruption abort in 3 of 4 runs before the fix
    rc, out = _run("""
        import threading
        rng = np.random.default_rng(0)
        xt = rng.standard_normal((2000, 16)).astype("float32")
        idx = faiss_ext.index_factory(16, "BiLSH8x6_t3")
        idx.train(xt)
        stop = threading.Event()
        def writer():
            for _ in range(15):
                idx.reset()
                for b in range(4):
                    idx.add(xt[b * 500:(b + 1) * 500])
            stop.set()
        t = threading.Thread(target=writer); t.start()
        copies = 0
        while not stop.is_set():
            v = idx.get_vectors()
            assert v.shape[0] % 500 == 0 and np.array_equal(v, xt[:len(v)])
            f = idx.to_index_flat()
            assert f.ntotal % 500 == 0
            copies += 1
        t.join()
        print("COPIES", copies)
        """)
    assert rc == 0 and "COPIES" in out, "exit status %d, output:\n%s" % (rc, out)


def test_r3_overlong_description_is_refused():
    _expect_raises_in_child('faiss_ext.index_factory(8, "A" * 30000)', "RuntimeError",
                            "characters")


def test_r4_deeply_nested_index_refine_file_is_refused(tmp_path):
    header = (b"IxRF" + np.int32(8).tobytes() + np.int64(0).tobytes()
              + np.int64(1 << 20).tobytes() * 2 + b"\x01" + np.int32(1).tobytes())
    path = tmp_path / "nested.index"
    path.write_bytes(header * 100000)
    _expect_raises_in_child("faiss_ext.read_index(%r)" % str(path), "RuntimeError",
                            "nested too deep")


def _gnnd_with_rows(n=200, desc="GNND8_it3"):
    rng = np.random.default_rng(1)
    idx = faiss_ext.index_factory(8, desc)
    x = rng.standard_normal((n, 8)).astype("float32")
    if "IDMap" in desc:
        idx.add_with_ids(x, np.arange(n, dtype="int64") + 10)
    else:
        idx.add(x)
    return idx, x


def test_r5_gnnd_file_with_pool_past_ntotal_reads_and_refuses_search(tmp_path):
    idx, x = _gnnd_with_rows()
    data = faiss_ext.serialize_index(idx).copy()
    at = 4 + 33 + 7 * 4  # INNf: fourcc, header, ntotal d K S R L iter, then search_L
    data[at:at + 4] = np.frombuffer(np.int32(201).tobytes(), dtype=np.uint8)
    path = tmp_path / "bumped.index"
    path.write_bytes(data.tobytes())
    _expect_raises_in_child("""
        idx = faiss_ext.read_index(%r)
        assert idx.nndescent.search_L == 201
        idx.search(np.zeros((1, 8), "float32"), 5)
        """ % str(path), "RuntimeError", "candidate pool")


@pytest.mark.parametrize("k", [200, 201])
def test_r6_gnnd_search_with_pool_reaching_ntotal_is_refused(k):
    # SIGFPE at k = 200 and NaN distances then SIGSEGV at 201 before the fix
    _expect_raises_in_child("""
        rng = np.random.default_rng(1)
        idx = faiss_ext.index_factory(8, "GNND8_it3")
        idx.add(rng.standard_normal((200, 8)).astype("float32"))
        idx.search(rng.standard_normal((3, 8)).astype("float32"), %d)
        """ % k, "RuntimeError", "candidate pool")


@pytest.mark.parametrize("when", ["before add", "after reset"])
def test_r6_gnnd_search_of_an_empty_twin_is_refused(when):
    _expect_raises_in_child("""
        idx = faiss_ext.index_factory(8, "GNND8")
        if %r == "after reset":
            idx.add(np.random.default_rng(1).standard_normal((200, 8)).astype("float32"))
            idx.reset()
        idx.search(np.zeros((2, 8), "float32"), 5)
        """ % when, "RuntimeError", "empty")


def test_r6_gnnd_search_under_an_id_map_is_checked_too():
    _expect_raises_in_child("""
        rng = np.random.default_rng(1)
        idx = faiss_ext.index_factory(8, "IDMap,GNND8_it3")
        idx.add_with_ids(rng.standard_normal((200, 8)).astype("float32"), np.arange(200) + 10)
        idx.search(rng.standard_normal((3, 8)).astype("float32"), 200)
        """, "RuntimeError", "candidate pool")


def test_r6_gnnd_search_that_faiss_answers_still_works():
    idx, x = _gnnd_with_rows()
    assert isinstance(idx, faiss.IndexNNDescentFlat)
    D, I = idx.search(x[:5], 10)
    assert I.shape == (5, 10) and (I >= 0).all() and (I < 200).all()
    assert (I[:, 0] == np.arange(5)).all()


@pytest.mark.parametrize("key", [10 ** 6, -1, 20])
def test_r7_flat_reconstruct_out_of_range_is_refused(key):
    # SIGSEGV for 10**6 and garbage for -1 before the fix
    _expect_raises_in_child("""
        idx = faiss_ext.index_factory(8, "QSFlat")
        idx.add(np.ones((20, 8), "float32"))
        idx.reconstruct(%d)
        """ % key, "IndexError", "out of range")


def test_r7_reconstruct_n_and_wrapped_flats_are_checked():
    idx = faiss_ext.index_factory(8, "QSFlat")
    x = np.arange(160, dtype="float32").reshape(20, 8)
    idx.add(x)
    assert np.array_equal(idx.reconstruct(19), x[19])
    assert np.array_equal(idx.reconstruct_n(18, 2), x[18:])
    with pytest.raises(IndexError):
        idx.reconstruct_n(19, 2)
    cos = faiss_ext.index_factory(8, "QSFlatCosine")
    cos.add(x)
    with pytest.raises(IndexError):
        cos.reconstruct(20)
    mapped = faiss_ext.index_factory(8, "IDMap2,QSFlat")
    mapped.add_with_ids(x, np.arange(20, dtype="int64") + 100)
    assert np.array_equal(mapped.reconstruct(119), x[19])  # ids, not positions


# ---- silent wrong results ----

@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full here")
def test_s1_failed_write_raises():
    flat = faiss_ext.index_factory(8, "QSFlat")
    flat.add(np.ones((10, 8), "float32"))
    with pytest.raises(RuntimeError, match="/dev/full"):
        faiss_ext.write_index(flat, "/dev/full")
    pearson = faiss_ext.index_factory(8, "QSFlatPearson")
    assert isinstance(pearson, faiss.IndexPreTransform)
    with pytest.raises(RuntimeError, match="/dev/full"):
        faiss_ext.write_index(pearson, "/dev/full")


@pytest.mark.parametrize("desc", ["PCA0,QSFlat", "PCA0,Flat", "PCA0,GNND8"])
def test_s2_zero_dimensions_are_refused(desc):
    with pytest.raises(RuntimeError, match="dimension"):
        faiss_ext.index_factory(4, desc)


def test_s3_factory_writer_and_reader_agree_on_nesting(tmp_path):
    with pytest.raises(RuntimeError, match="nests 33"):
        faiss_ext.index_factory(4, "IDMap," * 33 + "QSFlat")
    deepest = faiss_ext.index_factory(4, "IDMap," * 32 + "QSFlat")
    path = str(tmp_path / "deep.index")
    faiss_ext.write_index(deepest, path)
    back = faiss_ext.read_index(path)
    assert back.d == 4


def test_s4_nul_in_description_and_file_names_is_refused(tmp_path):
    with pytest.raises(ValueError, match="NUL"):
        faiss_ext.index_factory(8, "QSFlat\x00junk")
    with pytest.raises(ValueError):
        faiss_ext.read_index(str(tmp_path / "a") + "\x00b")
    with pytest.raises(ValueError):
        faiss_ext.write_index(faiss_ext.index_factory(8, "QSFlat"), str(tmp_path / "a") + "\x00b")


# ---- messages ----

def test_m1_directory_is_reported_as_a_directory(tmp_path):
    with pytest.raises(RuntimeError, match="is a directory"):
        faiss_ext.read_index(str(tmp_path))


@pytest.mark.skipif(faiss_ext.get_num_gpus() > 0, reason="checks the message without a GPU")
def test_m2_select_k_without_a_gpu_says_so():
    res = faiss_ext.StandardGpuResources()
    with pytest.raises(RuntimeError, match="no CUDA GPU is available"):
        faiss_ext.select_k(res, np.zeros((2, 8), "float32"), 3)


def test_m3_huge_strided_view_is_a_memory_error():
    idx = faiss_ext.index_factory(8, "BiLSH4x4_t1")
    idx.train(np.random.default_rng(0).standard_normal((100, 8)).astype("float32"))
    view = np.lib.stride_tricks.as_strided(np.zeros(8), shape=(2 ** 40, 8), strides=(0, 8))
    with pytest.raises(MemoryError, match="x: out of memory"):
        idx.add(view)
    assert idx.ntotal == 0


@pytest.mark.parametrize("n", [40, 100])
def test_gnnd_add_of_100_rows_or_fewer_is_refused(n):
    # FAISS's build divides by zero at 100 rows (SIGFPE), reads garbage below
    _expect_raises_in_child("""
        idx = faiss_ext.index_factory(8, "GNND8")
        try:
            idx.add(np.ones((%d, 8), "float32"))
        finally:
            assert idx.ntotal == 0
        """ % n, "RuntimeError", "more than 100")


def test_non_integer_k_is_refused_not_truncated():
    """search(x, 2.5) searched with k = 2 (issue 37): a float or a bool k is a
    TypeError naming it; Python and numpy integers pass."""
    rng = np.random.default_rng(5)
    x = rng.random((400, 16), dtype=np.float32)
    index = faiss_ext.index_factory(16, "BiLSH4x8")
    index.train(x)
    index.add(x)
    for bad in (2.5, 3.0, True, "3", None):
        with pytest.raises(TypeError, match="k must be an integer"):
            index.search(x[:3], bad)
    D, I = index.search(x[:3], np.int64(4))
    assert I.shape == (3, 4)
    D, I = index.search(x[:3], 4)
    assert I.shape == (3, 4)


@pytest.mark.parametrize("description", ["IDMap,QSFlat", "IDMap2,QSFlat", "IDMap,SGraph32",
                                         "IDMap2,GNND16", "IDMap2,BiLSH4x8"])
def test_reconstruct_n_of_id_mapped_chains_raises_instead_of_aborting(description):
    """reconstruct_n on an id map for ids not in it ended the process (an
    exception inside FAISS's OpenMP loop, exit 134; issue 37): now it raises,
    and ids in the map come back. Run in a child process, so that an abort
    fails this test instead of the whole run."""
    script = textwrap.dedent("""
        import faiss, faiss_ext, numpy as np
        x = np.random.default_rng(2).random((300, 16), dtype=np.float32)
        index = faiss_ext.index_factory(16, %r)
        if not index.is_trained:
            index.train(x)
        index.add_with_ids(x, np.arange(300) * 2)
        try:
            index.reconstruct_n(0, 3)        # id 1 is not in the map
            print("no error")
        except RuntimeError:
            print("raised")
        if isinstance(index, faiss.IndexIDMap2):
            back = index.reconstruct_n(4, 1)  # id 4 is vector 2
            print("same" if np.allclose(back[0], index.reconstruct(4)) else "differs")
        """ % description)
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=120, env=dict(os.environ))
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.split()[0] == "raised", run.stdout
    if description.startswith("IDMap2"):
        assert run.stdout.split()[1] == "same", run.stdout
