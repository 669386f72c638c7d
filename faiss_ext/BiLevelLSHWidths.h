// Bucket widths of Bi-level LSH from the data (BiLevelWidthRule::
// NeighbourDistance), shared by the CPU twin and the GPU index: both sample
// the same training rows (widthSampleRows), hand them to the same host code
// (neighbourDistanceWidths) and so get the same widths bit for bit.
//
// Why: p-stable LSH (Datar, Immorlica, Indyk & Mirrokni, "Locality-sensitive
// hashing scheme based on p-stable distributions", SoCG 2004,
// doi:10.1145/997817.997857) puts two points at distance r in the same cell
// of one projection with a probability that depends on r / W only. The
// distances that matter are those of a query to its k nearest neighbours, so
// W is set as a multiple of the typical k-th neighbour distance of the group
// (Bi-level LSH already sets W per RP-tree group: Pan & Manocha, GIS 2011,
// doi:10.1145/2093973.2094002). A group's RMS radius, the earlier rule, can
// be 2x or 20x that distance depending on the dimension and the clustering.
#pragma once

#include <cstdint>
#include <vector>

#include "faiss_ext/BiLevelLSHModel.h"

namespace faiss_ext {
namespace lsh {

/// Largest number of training rows neighbourDistanceWidths looks at.
constexpr int64_t kWidthSampleMax = 65536;
/// Sampled rows per group neighbourDistanceWidths aims at.
constexpr int64_t kWidthSamplePerGroup = 256;
/// Rows of a group whose neighbour distances are measured (the others are
/// only their possible neighbours).
constexpr int kWidthQueriesPerGroup = 64;

/// The training rows (ascending positions in [0, n)) whose vectors
/// neighbourDistanceWidths needs: all of them when n is small, else a
/// seeded random subset of min(n, max(8192, 256 x groups), 65536) rows.
std::vector<int64_t> widthSampleRows(int64_t n, int groups, uint64_t seed);

/// Sets model->leafWidth by BiLevelWidthRule::NeighbourDistance from the
/// vectors of the rows widthSampleRows chose (nSample x d, in that order).
/// Per group: the sampled rows that fall in it (model's tree), up to
/// kWidthQueriesPerGroup of them measured against all the others. The
/// group holds model->leafTrainCount[g] training vectors but the sample
/// only m of them, so the k-th neighbour of the whole group sits at rank
/// k (m - 1) / (count - 1) in the sample: read at that rank (interpolated)
/// when it is >= 1, else extrapolated below the nearest sampled neighbour
/// with the group's intrinsic dimension (Levina & Bickel, "Maximum
/// likelihood estimation of intrinsic dimension", NIPS 2004: r(rank) grows
/// as rank^(1/dim)). W_g = bucketWidth x the median over the measured
/// rows. A group with fewer than 8 sampled rows, or whose distances are 0,
/// takes the median of the other groups' widths (or keeps its RMS width
/// when none has one).
void neighbourDistanceWidths(BiLevelLSHModel* model, const BiLevelLSHConfig& config,
                             int64_t nSample, const float* sample);

/// Applies config.widthRule to a model whose tree is trained from the n
/// training vectors x (host memory): nothing for RmsRadius (setLeaves did
/// it), else neighbourDistanceWidths on the rows widthSampleRows picks.
void widthsFromHostData(BiLevelLSHModel* model, const BiLevelLSHConfig& config, int64_t n,
                        const float* x);

}  // namespace lsh
}  // namespace faiss_ext
