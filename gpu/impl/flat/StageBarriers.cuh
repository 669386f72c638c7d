// The shared-memory barriers of a block's copy pipeline (PTX ISA,
// "Parallel Synchronization and Communication Instructions: mbarrier"), for
// the resident warpgroup kernel (FusedCandidatesWgmma.cu): each stage has a
// `full` barrier, completed when every thread's copies into it have landed
// (cp.async.mbarrier.arrive.noinc: the copies themselves arrive, so that
// no thread waits for its own), and an `empty` barrier, completed when
// every warp has finished reading it. Waiting on these per stage instead of
// one __syncthreads a step lets a warpgroup run up to a stage ahead of the
// other (its products and epilogue overlap the other's), the hand-off the
// producer / consumer pipelines of CUTLASS's Hopper GEMMs are built on.
// sm_90 (mbarrier.try_wait).
#pragma once

#include <cstdint>

namespace faiss_ext {
namespace gpu {
namespace fused {

/// Shared address of a barrier (the instructions take 32-bit addresses).
__device__ __forceinline__ unsigned barrierAddress(uint64_t* barrier) {
    return unsigned(__cvta_generic_to_shared(barrier));
}

/// Sets a barrier to expect `arrivals` arrivals a phase (phase 0 pending).
__device__ __forceinline__ void initBarrier(uint64_t* barrier, unsigned arrivals) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(barrierAddress(barrier)),
                 "r"(arrivals)
                 : "memory");
}

/// Arrives (release, CTA scope) once the calling thread's earlier cp.async
/// copies have landed, counted as one of the phase's expected arrivals.
__device__ __forceinline__ void arriveWhenCopiesLand(uint64_t* barrier) {
    asm volatile(
        "cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(barrierAddress(barrier))
        : "memory");
}

/// Arrives now (release, CTA scope).
__device__ __forceinline__ void arrive(uint64_t* barrier) {
    asm volatile("{\n.reg .b64 state;\nmbarrier.arrive.shared::cta.b64 state, [%0];\n}\n" ::"r"(
                     barrierAddress(barrier))
                 : "memory");
}

/// Waits (acquire, CTA scope) until the phase of parity `parity` has
/// completed. A fresh barrier counts its phase "before 0" (parity 1) as
/// complete, so a first wait with parity 1 returns at once.
__device__ __forceinline__ void waitPhase(uint64_t* barrier, unsigned parity) {
    const unsigned address = barrierAddress(barrier);
    unsigned done = 0;
    do {
        asm volatile(
            "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
            "selp.u32 %0, 1, 0, p;\n}\n"
            : "=r"(done)
            : "r"(address), "r"(parity)
            : "memory");
    } while (!done);
}

/// The full and empty barriers of kStages stages (in shared memory).
template <int kStages>
struct StageBarriers {
    uint64_t full[kStages];
    uint64_t empty[kStages];

    /// By one thread, before a __syncthreads: `copiers` threads fill each
    /// stage, `readers` warps read it.
    __device__ void init(unsigned copiers, unsigned readers) {
        for (int i = 0; i < kStages; ++i) {
            initBarrier(&full[i], copiers);
            initBarrier(&empty[i], readers);
        }
    }
};

/// The parity a thread waits for next on each of StageBarriers' barriers
/// (bit i: stage i; every thread passes the same sequence of stages, so the
/// bits agree across the block). Full phases are waited for from parity 0,
/// empty ones from parity 1 (a stage never filled is free).
template <int kStages>
struct StagePhases {
    unsigned fullParity = 0;
    unsigned emptyParity = (1u << kStages) - 1;

    /// Waits until stage i may be refilled (its last fill read by every warp).
    __device__ __forceinline__ void waitEmpty(StageBarriers<kStages>& b, int i) {
        waitPhase(&b.empty[i], (emptyParity >> i) & 1u);
        emptyParity ^= 1u << i;
    }
    /// Waits until stage i's copies have landed (every thread's).
    __device__ __forceinline__ void waitFull(StageBarriers<kStages>& b, int i) {
        waitPhase(&b.full[i], (fullParity >> i) & 1u);
        fullParity ^= 1u << i;
    }
};

}  // namespace fused
}  // namespace gpu
}  // namespace faiss_ext
