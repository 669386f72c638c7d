// gen_clustered: writes a generated clustered data set (bench/BenchData.h)
// as two .fbin files, PREFIX_base.fbin and PREFIX_query.fbin, for the
// benchmark programs and bench/torch_flat.py. Run it on the machine that
// benchmarks: 1M x 960 floats are 3.8 GB.
//
//   gen_clustered --nb 1M --nq 10k --d 128 [--seed 1234] --out /tmp/flat_1M_128
#include "bench/BenchData.h"
#include "bench/BenchUtil.h"

#include <cstdio>
#include <exception>

using namespace faiss_ext::bench;

int main(int argc, char** argv) {
    try {
        Args args(argc, argv, {"help"});
        if (args.has("help") || !args.has("out")) {
            std::printf("usage: gen_clustered --nb N --nq N --d D [--seed S] [--latent-dim M] "
                        "--out PREFIX\n  writes PREFIX_base.fbin and PREFIX_query.fbin\n");
            return args.has("help") ? 0 : 2;
        }
        args.checkKnown({"nb", "nq", "d", "seed", "latent-dim", "out", "help"});
        ClusteredSpec spec;
        const int64_t nb = args.getInt("nb", 100000), nq = args.getInt("nq", 10000);
        spec.d = int(args.getInt("d", 128));
        spec.seed = uint64_t(args.getInt("seed", 1234));
        spec.latentDim = int(args.getInt("latent-dim", spec.latentDim));
        spec.clusters = defaultClusters(nb);
        const std::string out = args.get("out");
        double t0 = nowSeconds();
        writeFbin(out + "_base.fbin", generateClustered(spec, nb, 0));
        writeFbin(out + "_query.fbin", generateClustered(spec, nq, 1));
        std::fprintf(stderr, "gen_clustered: %lld + %lld vectors, d = %d, %d clusters, intrinsic "
                     "dimension %d, seed %llu -> %s_{base,query}.fbin (%.1f s)\n",
                     (long long)nb, (long long)nq, spec.d, spec.clusters, spec.latentDim,
                     (unsigned long long)spec.seed, out.c_str(), nowSeconds() - t0);
        return 0;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "gen_clustered: error: %s\n", e.what());
        return 2;
    }
}
