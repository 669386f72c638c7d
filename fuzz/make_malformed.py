#!/usr/bin/env python3
"""Hand-made malformed inputs for tests/data/fuzz_regress (docs/fuzzing.md).

Each is a seed of fuzz/corpus/seeds (valid files written by make_seeds) with
one field forged or the end cut off, aimed at one guard of faiss_ext's
reader; tests/test_cpu_fuzz_regress.cpp reads them all and expects
faiss::FaissException. Offsets follow the layouts documented at the top of
faiss_ext/index_io.cpp (FAISS's index header is 33 bytes after the fourcc).
    fuzz/make_malformed.py            (run from the repository root)
"""
import struct
from pathlib import Path

SEEDS = Path("fuzz/corpus/seeds")
OUT = Path("tests/data/fuzz_regress")


def seed(name):
    return bytearray((SEEDS / f"{name}.index").read_bytes())


def put(b, fmt, off, *v):
    struct.pack_into("<" + fmt, b, off, *v)
    return b


HDR = 4 + 33  # fourcc + faiss::Index header: d, ntotal, 2 dummies, is_trained, metric


def header(d, ntotal, trained=1, metric=1):
    return struct.pack("<iqqqBi", d, ntotal, 1 << 20, 1 << 20, trained, metric)


cases = {}
# IndexFlatL2: the float count (after the header) claims 2^60 floats
cases["flat_absurd_float_count"] = put(seed("qsflat_l2"), "Q", HDR, 1 << 60)
# IndexFlatL2: d = -1 in the header
cases["flat_negative_d"] = put(seed("qsflat_l2"), "i", 4, -1)
# IndexIDMap: cut in the middle of its id map
cases["idmap_truncated_ids"] = seed("idmap_qsflat")[:-13]
# IndexIDMap over an IndexFlatL2 with a different ntotal
b = seed("idmap_qsflat")
cases["idmap_ntotal_mismatch"] = put(b, "q", 8, 21)
# IndexPreTransform: a chain of 2^30 transforms
cases["pretransform_chain_length"] = put(seed("qsflat_cosine"), "i", HDR, 1 << 30)
# NormalizationTransform with norm 1 (FAISS applies only 2)
cases["normalization_norm_1"] = put(seed("qsflat_cosine"), "f", HDR + 4 + 4, 1.0)
# 40 nested empty IndexIDMap headers: deeper than the reader's limit
cases["idmap_nested_too_deep"] = bytearray(b"".join(b"IxMp" + header(4, 0) for _ in range(40)))
# IndexNNDescentFlat: a graph entry equal to ntotal (FAISS's search follows it)
b = seed("gnnd_built")
ntotal = struct.unpack_from("<i", b, HDR)[0]
cases["nndescent_graph_id_out_of_range"] = put(b, "i", HDR + 45, ntotal)
# IndexNNDescentFlat: graph degree K = 0
cases["nndescent_k_zero"] = put(seed("gnnd_built"), "i", HDR + 8, 0)
# IndexNNDescentFlat: empty, but flagged has_built (FAISS's search would
# draw random start nodes modulo ntotal = 0)
cases["nndescent_empty_has_built"] = put(seed("gnnd_empty"), "B", HDR + 36, 1)
# IndexBiLevelLSH ("IxBL", version first; the seed is a version 1 file,
# which the reader still reads beside version 2): version 99
cases["ixbl_version_99"] = put(seed("bilsh"), "i", 4, 99)
IXBL_CFG = 4 + 4 + 33  # fourcc, version, header
# treeDepth 15 (at most 14)
cases["ixbl_tree_depth_15"] = put(seed("bilsh"), "i", IXBL_CFG, 15)
# has_model 0 while the header says trained
cases["ixbl_has_model_mismatch"] = put(seed("bilsh"), "B", IXBL_CFG + 40, 0)
# the model's d differs from the index's
cases["ixbl_model_d_mismatch"] = put(seed("bilsh"), "i", IXBL_CFG + 41, 5)
# cut in the middle of the vectors
cases["ixbl_truncated_vectors"] = seed("bilsh")[:-50]
# a NaN in the last stored vector (Bi-level LSH needs finite vectors)
cases["ixbl_nan_vector"] = put(seed("bilsh"), "f", len(seed("bilsh")) - 4, float("nan"))
# an unknown fourcc
cases["unknown_fourcc"] = bytearray(b"Zzzz" + header(4, 0))
# nothing at all
cases["empty"] = bytearray()

OUT.mkdir(parents=True, exist_ok=True)
for name, data in cases.items():
    (OUT / f"hand_{name}.bin").write_bytes(bytes(data))
    print(f"{OUT}/hand_{name}.bin  {len(data)} bytes")
