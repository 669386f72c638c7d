// Queries of a residual corpus's bounded search (ResidualQueries.h).
#include "faiss_ext/gpu/impl/flat/CentredCorpus.h"
#include "faiss_ext/gpu/impl/flat/Distance.h"
#include "faiss_ext/gpu/impl/flat/ResidualQueries.h"
#include "faiss_ext/gpu/impl/flat/Tf32Rounding.cuh"
#include "faiss_ext/gpu/utils/DeviceUtils.h"
#include "faiss_ext/gpu/utils/StaticUtils.h"

namespace faiss_ext {
namespace gpu {

namespace {

/// One warp per row: the norms of ResidualQueryNorms from the query q, the
/// mean m and q~ (in `rounded`, which becomes q_t), then the row's terms.
__global__ void finishResidualQueriesKernel(const float* queries, int64_t rows, int d,
                                            const float* mean, float* rounded,
                                            ResidualCorpusBounds bounds, float4* coefs,
                                            double2* certify) {
    const int lane = threadIdx.x & 31;
    const int64_t warps = int64_t(gridDim.x) * (blockDim.x >> 5);
    for (int64_t r = int64_t(blockIdx.x) * (blockDim.x >> 5) + (threadIdx.x >> 5); r < rows;
         r += warps) {
        double shifted = 0.0, tilde = 0.0, tf32 = 0.0, low = 0.0, query = 0.0, shift = 0.0;
        for (int i = lane; i < d; i += 32) {
            const double q = queries[r * d + i], m = mean[i];
            const float qTilde = rounded[r * d + i];
            const float qT = roundToTf32(qTilde);
            const double qLow = double(qTilde - qT);  // exact: q_t is q~ rounded
            shifted += (q - m) * (q - m);
            tilde += double(qTilde) * double(qTilde);
            tf32 += double(qT) * double(qT);
            low += qLow * qLow;
            query += q * q;
            shift += m * (m - 2.0 * q);  // (q - m)^2 - q^2
            rounded[r * d + i] = qT;
        }
        shifted = warpSumAll(shifted);
        tilde = warpSumAll(tilde);
        tf32 = warpSumAll(tf32);
        low = warpSumAll(low);
        query = warpSumAll(query);
        shift = warpSumAll(shift);
        if (lane == 0) {
            ResidualQueryNorms n;
            n.shifted = sqrt(shifted) * kBoundInflation;
            n.rounded = sqrt(tilde) * kBoundInflation;
            n.tf32 = sqrt(tf32) * kBoundInflation;
            n.low = sqrt(low) * kBoundInflation;
            n.query = sqrt(query) * kBoundInflation;
            n.sqShift = shift;
            const ResidualCoefs k = residualCoefs(n, bounds);
            coefs[r] = make_float4(k.a1, k.a2, k.b, 0.f);
            certify[r] = make_double2(residualKeyShift(n, bounds), residualMagnitude(n, bounds, k));
        }
    }
}

}  // namespace

void prepareResidualQueries(cublasHandle_t blas, const float* queries, int64_t rows,
                            const ResidualView& view, const ResidualCorpusBounds& bounds,
                            const ResidualQueryBlock& out, cudaStream_t stream) {
    if (rows == 0) return;
    const int d = view.d;
    subtractCentre(queries, rows, d, view.mean, out.tf32Rows, stream);  // q~ = fl(q - m)
    gemmDotProducts(blas, out.tf32Rows, rows, view.centres, view.partitions, d, 1.f, out.centreDots,
                    view.partitions);
    finishResidualQueriesKernel<<<gridStrideBlocks(rows, 8), 256, 0, stream>>>(
        queries, rows, d, view.mean, out.tf32Rows, bounds, out.coefs, out.certify);
    FAISS_EXT_CUDA_CHECK_LAUNCH();
}

}  // namespace gpu
}  // namespace faiss_ext
