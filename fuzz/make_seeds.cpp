// Writes the seed corpus of the read_index fuzzer (docs/fuzzing.md): small
// valid files of every format faiss_ext's reader handles (our fourccs, the
// FAISS wrappers and flat indexes it parses itself, and FAISS types it hands
// to faiss::read_index), each a few KB.
//   make_seeds OUTDIR
#include <faiss/IndexFlat.h>
#include <faiss/impl/FaissException.h>
#include <faiss/index_factory.h>

#include <cstdint>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "faiss_ext/IndexBiLevelLSH.h"
#include "faiss_ext/index_factory.h"
#include "faiss_ext/index_io.h"

namespace {

std::vector<float> randomVectors(int64_t n, int d, uint32_t seed) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> u(-1.f, 1.f);
    std::vector<float> x(size_t(n) * size_t(d));
    for (float& v : x) v = u(rng);
    return x;
}

int written = 0;

void save(const std::string& dir, const std::string& name, const faiss::Index* idx) {
    std::vector<uint8_t> b = faiss_ext::serialize_index(idx);
    // every seed must read back (else it is no seed of valid input)
    std::unique_ptr<faiss::Index> back(faiss_ext::deserialize_index(b));
    std::string path = dir + "/" + name + ".index";
    FILE* f = std::fopen(path.c_str(), "wb");
    if (!f || std::fwrite(b.data(), 1, b.size(), f) != b.size() || std::fclose(f) != 0) {
        std::fprintf(stderr, "make_seeds: cannot write %s\n", path.c_str());
        std::exit(1);
    }
    std::printf("%-28s %6zu bytes\n", (name + ".index").c_str(), b.size());
    ++written;
}

/// factory string (ours, else FAISS's), trained and filled with n vectors
/// (n = 0: left empty, and untrained when training is needed).
void fromFactory(const std::string& dir, const std::string& name, const char* desc, int d,
                 int64_t n, faiss::MetricType metric = faiss::METRIC_L2,
                 bool faissFactory = false) {
    std::unique_ptr<faiss::Index> idx(faissFactory ? faiss::index_factory(d, desc, metric)
                                                   : faiss_ext::index_factory(d, desc, metric));
    if (n > 0) {
        std::vector<float> x = randomVectors(n, d, uint32_t(written + 1));
        idx->train(n, x.data());  // always: "IDMap,BiLSH.." says is_trained too early
        if (std::string(desc).rfind("IDMap", 0) == 0) {
            std::vector<faiss::Index::idx_t> ids(n);
            for (int64_t i = 0; i < n; ++i) ids[i] = 1000 + 7 * i;
            idx->add_with_ids(n, x.data(), ids.data());
        } else {
            idx->add(n, x.data());
        }
    }
    save(dir, name, idx.get());
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: %s OUTDIR\n", argv[0]);
        return 2;
    }
    const std::string dir = argv[1];
    try {
        // our formats and the wrappers / flat indexes our reader parses
        fromFactory(dir, "qsflat_l2", "QSFlat", 4, 20);
        fromFactory(dir, "qsflat_ip", "QSFlat", 4, 20, faiss::METRIC_INNER_PRODUCT);
        fromFactory(dir, "flat_l1", "Flat", 4, 10, faiss::METRIC_L1, true);
        fromFactory(dir, "flat_lp_empty", "Flat", 4, 0, faiss::METRIC_Lp, true);
        fromFactory(dir, "idmap_qsflat", "IDMap,QSFlat", 4, 20);
        fromFactory(dir, "idmap2_qsflat", "IDMap2,QSFlat", 4, 20);
        fromFactory(dir, "qsflat_cosine", "QSFlatCosine", 4, 20, faiss::METRIC_INNER_PRODUCT);
        fromFactory(dir, "idmap2_qsflat_pearson", "IDMap2,QSFlatPearson", 5, 20,
                    faiss::METRIC_INNER_PRODUCT);
        fromFactory(dir, "pca_qsflat", "PCA4,QSFlat", 6, 30);
        fromFactory(dir, "gnnd_empty", "GNND4_p4_it2", 4, 0);
        // FAISS's own NN-Descent build needs more than 100 vectors
        fromFactory(dir, "gnnd_built", "GNND2_p4_it2", 2, 110);
        fromFactory(dir, "idmap_gnnd_ip", "IDMap,GNND2_p4_it2", 2, 105,
                    faiss::METRIC_INNER_PRODUCT);
        fromFactory(dir, "l2norm_gnnd", "L2norm,GNND2_p4_it2", 2, 105, faiss::METRIC_INNER_PRODUCT);
        fromFactory(dir, "bilsh_untrained", "BiLSH2x2_t1", 4, 0);
        fromFactory(dir, "bilsh", "BiLSH2x3_t2_w0.75", 4, 30);
        fromFactory(dir, "idmap_bilsh", "IDMap,BiLSH1x2_t1", 4, 20);
        fromFactory(dir, "idmap_bilsh_untrained", "IDMap,BiLSH2x2_t1", 4, 0);
        fromFactory(dir, "pca_bilsh", "PCA3,BiLSH2x2_t0", 4, 20);
        {
            // IndexBiLevelLSH through its own API, trained but empty
            faiss_ext::BiLevelLSHConfig c;
            c.treeDepth = 2;
            c.nTables = 2;
            c.nProjections = 4;
            c.cuckooSubTables = 2;
            c.seed = 7;
            faiss_ext::IndexBiLevelLSH lsh(8, c);
            std::vector<float> x = randomVectors(24, 8, 99);
            lsh.train(24, x.data());
            save(dir, "bilsh_api_trained_empty", &lsh);
            lsh.add(8, x.data());
            save(dir, "bilsh_api", &lsh);
        }
        // FAISS types read by faiss::read_index (inside our wrappers too)
        fromFactory(dir, "faiss_ivf_flat", "IVF2,Flat", 4, 40, faiss::METRIC_L2, true);
        fromFactory(dir, "faiss_hnsw", "HNSW4", 4, 20, faiss::METRIC_L2, true);
        fromFactory(dir, "faiss_pq", "PQ2x4", 4, 40, faiss::METRIC_L2, true);
        fromFactory(dir, "faiss_sq8", "SQ8", 4, 20, faiss::METRIC_L2, true);
        fromFactory(dir, "idmap_pca_ivf", "IDMap,PCA2,IVF2,Flat", 4, 40);
    } catch (const faiss::FaissException& e) {
        std::fprintf(stderr, "make_seeds: %s\n", e.what());
        return 1;
    }
    std::printf("%d seeds in %s\n", written, dir.c_str());
    return 0;
}
