// gen_hard: writes the ann suite's hard set (bench/AnnData.h: anisotropic
// clusters of Zipf-like sizes, the data bench_ann --data hard makes) as
// PREFIX_base.fbin, PREFIX_query.fbin and, with --ood-seed S, PREFIX_ood.fbin:
// queries drawn from the mixture of seed S, whose centres differ from the
// data's (bench_ann --hard-query-seed; queries unlike the data). No GPU:
// bench/ood_probe.py reads the files on the CPU.
//
//   gen_hard --nb 200k --nq 2000 [--d 100] [--clusters 500] [--seed 4321] [--ood-seed 777] --out /tmp/hard
#include "bench/AnnData.h"
#include "bench/BenchData.h"
#include "bench/BenchUtil.h"

#include <cstdio>
#include <exception>

using namespace faiss_ext::bench;

int main(int argc, char** argv) {
    try {
        Args args(argc, argv, {"help"});
        if (args.has("help") || !args.has("out")) {
            std::printf("usage: gen_hard --nb N --nq N [--d D] [--clusters C] [--seed S] "
                        "[--ood-seed S2] --out PREFIX\n  writes PREFIX_base.fbin, "
                        "PREFIX_query.fbin (and PREFIX_ood.fbin with --ood-seed)\n");
            return args.has("help") ? 0 : 2;
        }
        args.checkKnown({"nb", "nq", "d", "clusters", "seed", "ood-seed", "out", "help"});
        HardSpec spec;
        const int64_t nb = args.getInt("nb", 200000), nq = args.getInt("nq", 2000);
        spec.d = int(args.getInt("d", spec.d));
        spec.clusters = int(args.getInt("clusters", spec.clusters));
        spec.seed = uint64_t(args.getInt("seed", int64_t(spec.seed)));
        const std::string out = args.get("out");
        const double t0 = nowSeconds();
        writeFbin(out + "_base.fbin", generateHard(spec, nb, 0));
        writeFbin(out + "_query.fbin", generateHard(spec, nq, 1));
        if (args.has("ood-seed")) {
            HardSpec other = spec;
            other.seed = uint64_t(args.getInt("ood-seed", 777));
            writeFbin(out + "_ood.fbin", generateHard(other, nq, 1));
        }
        std::fprintf(stderr, "gen_hard: %lld + %lld vectors, d = %d, %d clusters, seed %llu -> %s_*.fbin "
                     "(%.1f s)\n", (long long)nb, (long long)nq, spec.d, spec.clusters,
                     (unsigned long long)spec.seed, out.c_str(), nowSeconds() - t0);
        return 0;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "gen_hard: error: %s\n", e.what());
        return 1;
    }
}
