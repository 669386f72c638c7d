// bench_gnnd_devices: the out-of-core GNND file build of one generated
// clustered set (N x 128, k = 32, 4 shards) on devices {0}, {0, 1} (when two
// GPUs exist) and {0, 0}, with recall@10 on 1000 sampled rows against exact
// search. Usage: bench_gnnd_devices [N]  (default 1M; writes /tmp/mg_*).
// Results: docs/benchmarks.md (issue-4 findings, "Two GPUs").
#include "gpu/GnndOutOfCore.h"
#include "gpu/GpuIndexQuickSelectFlat.h"
#include "gpu/StandardGpuResources.h"
#include <cstdio>
#include <random>
#include <vector>
#include <cstdlib>
using namespace faiss_ext::gpu;
int main(int argc, char** argv) {
  int64_t N = argc > 1 ? atoll(argv[1]) : 1000000; int D = 128; int k = 32;
  std::vector<float> X(N * D);
  { std::mt19937 rng(7); std::normal_distribution<float> nd(0, 1); int C = 1000;
    std::vector<float> cent(C * D); for (auto& v : cent) v = nd(rng) * 4;
    for (int64_t i = 0; i < N; ++i) { int c = rng() % C; for (int j = 0; j < D; ++j) X[i*D+j] = cent[c*D+j] + nd(rng); } }
  const char* path = "/tmp/mg_base.f32";
  { FILE* f = fopen(path, "wb"); fwrite(X.data(), 4, X.size(), f); fclose(f); }
  int ng = 0; cudaGetDeviceCount(&ng); printf("GPUs: %d\n", ng);
  std::vector<int64_t> rows(1000); { std::mt19937 rng(3); for (auto& r : rows) r = rng() % N; }
  std::vector<int64_t> gt(rows.size() * 10);
  { StandardGpuResources r; GpuIndexQuickSelectFlat flat(&r, D); flat.add(N, X.data());
    std::vector<float> q(rows.size() * D); for (size_t i = 0; i < rows.size(); ++i) std::copy(&X[rows[i]*D], &X[rows[i]*D] + D, &q[i*D]);
    std::vector<float> Dd(rows.size() * 11); std::vector<int64_t> Ii(rows.size() * 11);
    flat.search(rows.size(), q.data(), 11, Dd.data(), Ii.data());
    for (size_t i = 0; i < rows.size(); ++i) { int o = 0; for (int j = 0; j < 11 && o < 10; ++j) if (Ii[i*11+j] != rows[i]) gt[i*10 + o++] = Ii[i*11+j]; } }
  std::vector<std::vector<int>> devsets = {{0}};
  if (ng >= 2) devsets.push_back({0, 1});
  devsets.push_back({0, 0});
  StandardGpuResources res;
  for (auto& devs : devsets) {
    GnndFileBuildOptions opt; opt.devices = devs; opt.shardSize = N / 4; opt.workDir = "/tmp";
    auto rep = gnndBuildFromFile({&res}, path, VectorFileFormat::RawFloat32, D, k, faiss_ext::FlatMetric::L2, "/tmp/mg_graph.ivecs", opt);
    int64_t gn; int gk; auto G = readGraphIvecs("/tmp/mg_graph.ivecs", &gn, &gk);
    double hit = 0; for (size_t i = 0; i < rows.size(); ++i) for (int a = 0; a < 10; ++a) for (int b = 0; b < 10; ++b) if (G[rows[i]*gk + a] == gt[i*10+b]) { hit++; break; }
    printf("devices {%d%s}: %d shards, %d merges: build %.3f s, merges %.3f s, total %.3f s, recall@10 %.4f\n",
           devs[0], devs.size() > 1 ? (devs[1] ? ",1" : ",0") : "", rep.shards, rep.merges, rep.buildSeconds, rep.mergeSeconds, rep.totalSeconds, hit / (rows.size() * 10.0));
    fflush(stdout);
  }
  return 0;
}
