#!/usr/bin/env bash
# The unmeasured changes of this branch on the GPU machine (about 13 minutes: two calls).
# This branch's library (new) against main's (old):
#   tests  the fused / bounded / residual / sampled-threshold / host-query / search-graph GPU
#          tests (new library)
#   race   racecheck of the residual kernel with this library (cp.async.mbarrier.arrive.noinc)
#          and with a variant whose threads wait for their own copies and then arrive
#          (FAISS_EXT_VARIANT_OWN_WAIT: at 363e1a5 racecheck stopped on this kernel only with
#          "Internal Sanitizer Error: failed to handle a hardware exception")
#   flat   bench_flat on the clustered 1M x 128 and the far 10M x 96 at k 10 / 100 with the
#          TF32 floor: warp-aggregated appends and the shared threshold sample growing with
#          the corpus (auto; auto-s4096 / -s8192: the old sample size) against old's auto,
#          and the mma.sync kernel (tf32-bounded-mma)
#   host   numpy batches past 8 MB of queries in chunks against one search
#          (bench_ann --host-one-search-mb 8 / 100000): 100,000 x 128 and 5,000 x 784
#   graph  the search graph traversing 8-bit codes against FP16 (--traversal-codes
#          fp16,bytes, one build each): clustered 1M x 128, hard 1M x 100, hard 1M x 784;
#          the centred FP16 copy against main's on the point cloud (FP32 traversal beside);
#          at 100M, a call of its own (about 400 s: both builds in one process, same data):
#          FX_EXTRA="--traversal-codes fp16,bytes" bash bench/run_graph_100m_device.sh
#          $OUT 64:64 16 100
#   trace  CUPTI timelines of the far 10M search at k 100 / 10
# Stage here (build-gpu of this branch):
#   bash bench/stage_flat_scale.sh build-gpu KIT && rm -rf .device/anchor
#   cp + strip build-gpu/bench/{trace_search,bench_ann} into .device/bin/bench/
#   .device/old/libfaiss_ext.so.0.xz: main's library (xz of the stripped .so)
#   .device/variant/libfaiss_ext.so.0.xz: this branch's library with the wgmma object
#     compiled with -DFAISS_EXT_VARIANT_OWN_WAIT, relinked
# then with carry [".device"]: bash bench/ab_fused_appends_device.sh [PARTS]
# (default: all parts; e.g. "tests race flat", then "host graph trace").
# Written in sessions 17-18 (2026-12-05), when no device was lent after the first call.
set -u
cd "$(dirname "${BASH_SOURCE[0]}")/.."
t0=$(date +%s)
py_ld_path=${LD_LIBRARY_PATH:-}
source .device/env.sh
export FAISS_EXT_DATA_DIR=$PWD/.device/extra
export OMP_WAIT_POLICY=PASSIVE OMP_NUM_THREADS=16 OPENBLAS_NUM_THREADS=16
el() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
parts=" ${*:-tests race flat host graph trace} "
want() { case "$parts" in *" $1 "*) return 0 ;; esac; return 1; }
export PATH=$PATH:/usr/local/cuda/bin
compute-sanitizer --help 2>&1 | grep -i -A2 "racecheck" > $OUT/cs_help.txt
want tests && timeout 240 .device/bin/tests/gpu_tests --gtest_brief=1 \
  --gtest_filter='GpuFusedCandidates*:GpuFlatBounded*:GpuFlatBf16x3*:GpuResidualCorpus*:*HostQuer*:*Pinned*:GpuSelectSampledThreshold*:GpuSearchGraph*:GpuReliabilityFailures.InjectedAllocationFailuresSearchGraphFirstAdd' > $OUT/tests.log 2>&1
want tests && { el "tests rc=$?"; tail -3 $OUT/tests.log; }
mkdir -p /tmp/variant /tmp/old
xz -dc .device/variant/libfaiss_ext.so.0.xz > /tmp/variant/libfaiss_ext.so.0
xz -dc .device/old/libfaiss_ext.so.0.xz > /tmp/old/libfaiss_ext.so.0
race() {  # tag lib [tool args]
  local tag=$1 lib=$2; shift 2
  LD_LIBRARY_PATH=$lib:$LD_LIBRARY_PATH FAISS_EXT_TEST_SMALL=1 timeout 100 compute-sanitizer --tool racecheck \
    --kernel-name kns=fusedFilter --error-exitcode 9 "$@" .device/bin/tests/gpu_tests \
    --gtest_filter=GpuFlatBoundedResidual.CertifiesFarClustersOverResiduals > $OUT/race_$tag.log 2>&1
  el "race $tag rc=$?"; grep -h "SUMMARY\|Internal\|PASSED\|FAILED" $OUT/race_$tag.log | head -4
}
if want race; then
  race variant /tmp/variant
  race noinc /tmp/devlib
  grep -q "racecheck-memcpy-async" $OUT/cs_help.txt && race noinc-nomemcpy /tmp/devlib --racecheck-memcpy-async no
fi
tmp=/tmp/fx17; mkdir -p $tmp
source bench/flat_scale_set.sh
if want flat || want trace; then
  [ -f $tmp/far_base.fbin ] || { flat_scale_set $tmp/far far 10000000 10000 96 6161 $OUT/gen.err; el "gen far rc=$?"; }
fi
if want flat; then
  [ -f $tmp/cl_base.fbin ] || .device/bin/bench/gen_clustered --nb 1000000 --nq 10000 --d 128 --seed 1234 --out $tmp/cl 2>> $OUT/gen.err
fi
run() {  # tag lib base query dataset limit precisions
  local tag=$1 lib=$2
  LD_LIBRARY_PATH=$lib:$LD_LIBRARY_PATH timeout $6 .device/bin/bench/bench_flat --base $3 --query $4 --dataset $5 \
    --k 10,100 --methods ours,floor --precision $7 --reps 5 --recall-nq 8 --floor-mem-gib 8 \
    >> $OUT/ab_$tag.jsonl 2>> $OUT/ab_$tag.err
  el "$tag $5 rc=$?"; grep -h "floor (tf32):\|q/s" $OUT/ab_$tag.err | tail -12
}
# new: the branch's library at its default shared sample (16,384 vectors from 262,144 on)
# and at main's 4,096 / 8,192 (-sN; the appends alone are auto-s4096 against old's auto);
# old: main's library (never given -sN: it has no such hook)
want flat && for t in new old; do
  if [ $t = new ]; then lib=/tmp/devlib p=auto,auto-s4096,auto-s8192,tf32-bounded-mma,tf32-bounded-mma-s4096
  else lib=/tmp/old p=auto,tf32-bounded-mma; fi
  run $t $lib $tmp/cl_base.fbin $tmp/cl_query.fbin clustered-1M-128-seed1234 90 $p
done
want flat && for t in new old; do
  if [ $t = new ]; then lib=/tmp/devlib p=auto,auto-s4096,auto-s8192; else lib=/tmp/old p=auto; fi
  run $t $lib $tmp/far_base.fbin $tmp/far_query.fbin far-hard-10M-96-c3000 170 $p
done
# numpy batches past the one-search size: 100,000 x 128 (51 MB) and 5,000 x 784 (15.7 MB),
# chunked (8, the default) against one search (100000)
# the hard 1M x 784 set, made once (host, about 30 s) and read from files after
h784=/tmp/fx18/h784; mkdir -p $h784
data784() {
  if [ -f $h784/base.fbin ]; then echo --data files --base $h784/base.fbin --query $h784/query.fbin --name hard-784
  else echo --data hard --hard-d 784 --nq 5000 --write-dir $h784; fi
}
want host && for mb in 8 100000; do
  timeout 70 .device/bin/bench/bench_ann --data clustered --nq 100000 --degrees 64:128 --itopk 16,32,64 \
    --runs 5 --latency 0 --device-queries --host-one-search-mb $mb > $OUT/ann_mb$mb.jsonl 2> $OUT/ann_mb$mb.err
  el "ann mb$mb rc=$?"; tail -4 $OUT/ann_mb$mb.err
  timeout 120 .device/bin/bench/bench_ann $(data784) --degrees 64:128 --itopk 16,32 \
    --runs 5 --latency 0 --device-queries --host-one-search-mb $mb > $OUT/ann784_mb$mb.jsonl 2> $OUT/ann784_mb$mb.err
  el "ann784 mb$mb rc=$?"; tail -3 $OUT/ann784_mb$mb.err
done
# 10,000 x 128 (5 MB): one search (8, the default) against chunks (0): what a chunk's end costs
want host && for mb in 0 8; do
  timeout 60 .device/bin/bench/bench_ann --data clustered --nq 10000 --degrees 64:128 --itopk 16,32 \
    --runs 5 --latency 0 --device-queries --host-one-search-mb $mb > $OUT/ann10k_mb$mb.jsonl 2> $OUT/ann10k_mb$mb.err
  el "ann10k mb$mb rc=$?"; tail -2 $OUT/ann10k_mb$mb.err
done
# the search graph traversing 8-bit codes against FP16 (graph::setTraversalCodes; one build
# each, same process and data): clustered 1M x 128, hard 1M x 100, hard 1M x 784 (nq 5,000)
graph_ab() {  # tag limit bench_ann-args...
  local tag=$1 limit=$2; shift 2
  timeout $limit .device/bin/bench/bench_ann "$@" --degrees 64:128 --traversal-codes fp16,bytes \
    --itopk 16,32,64,128 --runs 5 --latency 0 --device-queries > $OUT/codes_$tag.jsonl 2> $OUT/codes_$tag.err
  el "codes $tag rc=$?"
  python3 - $OUT/codes_$tag.jsonl <<'P'
import json, sys
for l in open(sys.argv[1]):
    r = json.loads(l); p = r.get("params", {})
    if r["method"] == "ours:graph":
        print(p.get("traversal_codes"), p.get("itopk"), round(r["recall"], 4), int(r["qps"]),
              int(r.get("qps_device_queries", 0)))
    elif r["method"] == "ours:graph-build":
        print(p.get("traversal_codes"), "build", round(r["seconds"], 2))
P
}
if want graph; then
  graph_ab clustered 120 --data clustered --nq 10000
  graph_ab hard100 120 --data hard --nq 10000
  graph_ab hard784 150 $(data784)
  # the FP16 copy centred (new) against uncentred (old), and FP32 traversal on the same
  # graph (--fp16 0), on the point cloud (d 3, far from the origin)
  pc=.device/extra/pointcloud-rs
  for t in new old; do
    lib=/tmp/devlib; [ $t = old ] && lib=/tmp/old
    LD_LIBRARY_PATH=$lib:$LD_LIBRARY_PATH timeout 60 .device/bin/bench/bench_ann --data files \
      --base $pc/rs1_base.fvecs --query $pc/rs22_query.fvecs --name pointcloud-rs --fp16 0,1 \
      --itopk 32,64,128 --runs 3 --latency 0 > $OUT/pc_$t.jsonl 2> $OUT/pc_$t.err
    el "pointcloud $t rc=$?"
    python3 -c "import json,sys
for l in open(sys.argv[1]):
    r=json.loads(l); p=r.get('params',{})
    if r['method']=='ours:graph': print(sys.argv[2], 'fp16', p.get('fp16'), 'itopk', p.get('itopk'), round(r['recall'],4), int(r['qps']))" $OUT/pc_$t.jsonl $t
  done
fi
export LD_LIBRARY_PATH=/usr/local/cuda/extras/CUPTI/lib64:$LD_LIBRARY_PATH
want trace && for k in 100 10; do
  timeout 40 .device/bin/bench/trace_search --base $tmp/far_base.fbin --query $tmp/far_query.fbin \
    --nq 10000 --k $k --reps 2 --min-us 20 --precision auto > $OUT/trace_k$k.txt 2> $OUT/trace_k$k.err
  el "trace k$k rc=$?"; grep "search 1\|GPU busy" $OUT/trace_k$k.txt | tail -2
done
el done
