// The Bi-level LSH autotuner (faiss_ext/BiLevelLSHAutoTune.h):
// BiLevelAutoTuneOptions, BiLevelAutoTuneResult and autotune_bilevel_lsh,
// which evaluates on the CPU twin, or on a GPU when given resources.
#include <faiss/impl/FaissException.h>
#include <pybind11/stl.h>

#include <memory>
#include <optional>
#include <string>

#include "bindings.h"
#include "faiss_ext/BiLevelLSHAutoTune.h"
#include "faiss_ext/gpu/GpuBiLevelLSHTuneEvaluator.h"

namespace faiss_ext {
namespace python {

namespace {

py::dict pointToDict(const BiLevelTunePoint& p) {
    py::dict d;
    d["config"] = p.config;
    d["recall"] = p.recall;
    d["candidates"] = p.candidates;
    d["predicted_speedup"] = p.predictedSpeedup;
    return d;
}

}  // namespace

void bindLshAutoTune(py::module_& m) {
    using namespace pybind11::literals;
    py::class_<BiLevelAutoTuneOptions>(m, "BiLevelAutoTuneOptions", R"doc(
What autotune_bilevel_lsh tries and aims at (faiss_ext/BiLevelLSHAutoTune.h).

target_recall ((0, 1], default 0.9) of recall@k (k, default 10);
validation_fraction: the part of the held-out queries kept for the reported
recall ((0, 1), default 0.5); selection_margin: a setting is chosen only at
recall >= target + this on the other part (default 0.01); the settings
tried: tree_depths, tables_projections ([(L, M), ...]), bucket_widths
(multiples of the k-th neighbour distance), nprobes, group_settings
([(group_probes, group_margin), ...]), min_candidates, lattices (0 the
grid, 1 E8); cost_ntotal: the
database size of the throughput prediction (0: the one tuned on); base: a
BiLevelLSHConfig for the untuned fields; verbose. Checked when tuning.
)doc")
        .def(py::init<>())
        .def_readwrite("target_recall", &BiLevelAutoTuneOptions::targetRecall)
        .def_readwrite("k", &BiLevelAutoTuneOptions::k)
        .def_readwrite("validation_fraction", &BiLevelAutoTuneOptions::validationFraction)
        .def_readwrite("selection_margin", &BiLevelAutoTuneOptions::selectionMargin)
        .def_readwrite("tree_depths", &BiLevelAutoTuneOptions::treeDepths)
        .def_readwrite("tables_projections", &BiLevelAutoTuneOptions::tablesProjections)
        .def_readwrite("bucket_widths", &BiLevelAutoTuneOptions::bucketWidths)
        .def_readwrite("nprobes", &BiLevelAutoTuneOptions::nprobes)
        .def_readwrite("group_settings", &BiLevelAutoTuneOptions::groupSettings)
        .def_readwrite("min_candidates", &BiLevelAutoTuneOptions::minCandidates)
        .def_readwrite("lattices", &BiLevelAutoTuneOptions::lattices)
        .def_readwrite("cost_ntotal", &BiLevelAutoTuneOptions::costNtotal)
        .def_readwrite("base", &BiLevelAutoTuneOptions::base)
        .def_readwrite("verbose", &BiLevelAutoTuneOptions::verbose);

    py::class_<BiLevelAutoTuneResult>(m, "BiLevelAutoTuneResult", R"doc(
What autotune_bilevel_lsh found: config (a BiLevelLSHConfig: the chosen
build parameters, its search settings as default_*), recall (on validation
queries that took no part in the choice), selection_recall, candidates (per
query), predicted_speedup (throughput relative to exact search, predicted),
reached_target, beats_exact, verdict (a plain sentence), builds, points (every
measured setting: dicts of config, recall, candidates, predicted_speedup).
)doc")
        .def_readonly("config", &BiLevelAutoTuneResult::config)
        .def_readonly("recall", &BiLevelAutoTuneResult::recall)
        .def_readonly("selection_recall", &BiLevelAutoTuneResult::selectionRecall)
        .def_readonly("candidates", &BiLevelAutoTuneResult::candidates)
        .def_readonly("predicted_speedup", &BiLevelAutoTuneResult::predictedSpeedup)
        .def_readonly("reached_target", &BiLevelAutoTuneResult::reachedTarget)
        .def_readonly("beats_exact", &BiLevelAutoTuneResult::beatsExact)
        .def_readonly("verdict", &BiLevelAutoTuneResult::verdict)
        .def_readonly("builds", &BiLevelAutoTuneResult::builds)
        .def_property_readonly("points",
                               [](const BiLevelAutoTuneResult& r) {
                                   py::list out;
                                   for (const BiLevelTunePoint& p : r.points)
                                       out.append(pointToDict(p));
                                   return out;
                               })
        .def("__repr__", [](const BiLevelAutoTuneResult& r) {
            return "BiLevelAutoTuneResult(" + r.verdict + ")";
        });

    m.def(
        "autotune_bilevel_lsh",
        [](const py::handle& xb, const py::handle& xq, std::optional<BiLevelAutoTuneOptions> opt,
           gpu::GpuResourcesProvider* res) {
            FloatArray probe = xb.is_none() ? FloatArray() : FloatArray::ensure(xb);
            if (!probe || probe.ndim() != 2 || probe.shape(1) < 1) {
                PyErr_Clear();
                throw py::value_error("xb must be a 2-D float32 array of shape (n, d), d >= 1");
            }
            const int d = int(probe.shape(1));
            FloatArray b = toFloatMatrix(xb, d, "xb");
            FloatArray q = toFloatMatrix(xq, d, "xq");
            const BiLevelAutoTuneOptions options = opt.value_or(BiLevelAutoTuneOptions());
            const int64_t n = b.shape(0), nq = q.shape(0);
            const float* bp = b.data();
            const float* qp = q.data();
            py::gil_scoped_release release;
            if (res) {
                gpu::GpuBiLevelLSHTuneEvaluator evaluator(res);
                return autoTuneBiLevelLSH(d, n, bp, nq, qp, options, &evaluator);
            }
            BiLevelTuneEvaluatorCpu evaluator;
            return autoTuneBiLevelLSH(d, n, bp, nq, qp, options, &evaluator);
        },
        "xb"_a, "xq"_a, "options"_a = py::none(), "res"_a = nullptr, R"doc(
Tunes Bi-level LSH for a database xb (n, d) and held-out queries xq (nq, d)
of the distribution of the queries to come (not rows of xb): returns a
BiLevelAutoTuneResult. res: None evaluates with the CPU twin; a
StandardGpuResources evaluates on that GPU (same choice, faster). Then
    index = faiss_ext.IndexBiLevelLSH(d, result.config)   # or GpuIndexBiLevelLSH
    index.train(xb); index.add(xb); index.search(x, k)    # the chosen search settings
Bad arguments raise before any work. The GIL is released meanwhile.
)doc");
}

}  // namespace python
}  // namespace faiss_ext
