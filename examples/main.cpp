// faiss_ext_example: builds an index with faiss_ext::index_factory, moves it
// to the GPU with faiss_ext::gpu::index_cpu_to_gpu when there is one, adds
// vectors, searches and prints the neighbours. Each query is a copy of a base
// vector, so its nearest neighbour must be that vector; the exit status says
// whether it was.
#include <faiss_ext/index_factory.h>
#include <faiss_ext/gpu/GpuCloner.h>
#include <faiss_ext/gpu/StandardGpuResources.h>
#include <faiss_ext/gpu/utils/DeviceUtils.h>

#include <cstdio>
#include <exception>
#include <memory>
#include <random>
#include <vector>

int main() {
    try {
        const int d = 64;
        const int64_t nb = 10000, nq = 3, k = 5;
        std::mt19937 rng(42);
        std::normal_distribution<float> normal;
        std::vector<float> xb(size_t(nb) * d);
        for (auto& v : xb) v = normal(rng);
        const int64_t queryRows[nq] = {7, 1234, 9999};
        std::vector<float> xq;
        for (int64_t r : queryRows) xq.insert(xq.end(), xb.begin() + r * d, xb.begin() + (r + 1) * d);

        // A CPU twin from the factory; on a GPU, our GpuIndexQuickSelectFlat.
        std::unique_ptr<faiss::Index> index(faiss_ext::index_factory(d, "QSFlat", faiss::METRIC_L2));
        std::unique_ptr<faiss_ext::gpu::StandardGpuResources> res;
        if (faiss_ext::gpu::getNumDevices() > 0) {
            res.reset(new faiss_ext::gpu::StandardGpuResources());
            index.reset(faiss_ext::gpu::index_cpu_to_gpu(res.get(), 0, index.get()));
            std::printf("GPU found: searching with faiss_ext::gpu::index_cpu_to_gpu(index_factory(%d, \"QSFlat\"))\n", d);
        } else {
            std::printf("no GPU found: searching with the CPU twin index_factory(%d, \"QSFlat\")\n", d);
        }

        index->add(nb, xb.data());
        std::vector<float> D(size_t(nq) * k);
        std::vector<faiss::Index::idx_t> I(size_t(nq) * k);
        index->search(nq, xq.data(), k, D.data(), I.data());

        bool ok = true;
        for (int64_t q = 0; q < nq; ++q) {
            std::printf("query %lld (a copy of base row %lld):", (long long)q, (long long)queryRows[q]);
            for (int64_t j = 0; j < k; ++j)
                std::printf("  %lld (%.3f)", (long long)I[q * k + j], D[q * k + j]);
            std::printf("\n");
            ok = ok && I[q * k] == queryRows[q];
        }
        std::printf("%s\n", ok ? "OK: every query found itself first" : "FAILED: a query did not find itself first");
        return ok ? 0 : 1;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "faiss_ext_example: error: %s\n", e.what());
        return 2;
    }
}
