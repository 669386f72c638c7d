#!/usr/bin/env bash
# Runs a benchmark suite on the GPU machine and appends its JSON lines to
# bench/results/<suite>.jsonl (and, when $OUT is set, copies this run's lines
# to $OUT/<suite>_new.jsonl and the log to $OUT/<suite>.log as it goes, so a
# run cut short still returns what it measured). See bench/README.md.
#
#   bench/run_suite.sh flat               the whole flat suite (~5-8 minutes on an H100)
#   bench/run_suite.sh flat --quick       one small generated set + siftsmall (a smoke test)
#                                         (FX_FLAT_PRECISION=fp32,tf32-bounded adds the bounded
#                                         TF32 path and the TF32 GEMM floor to every flat set)
#   bench/run_suite.sh select             selection alone: bench_select (ours per algorithm, the
#                                         memory-read floor) and torch_select.py (torch.topk), one
#                                         pair of steps per nq (2.5 minutes on an H100)
#   bench/run_suite.sh select --quick     8 shapes (nq 64,2048 x nb 2^16,2^20 x k 32,1024)
#   bench/run_suite.sh knngraph           exact 10-NN graph of 100k and 1M x 128 (clustered):
#                                         torch_knngraph.py, then bench_knngraph (2 minutes)
#   bench/run_suite.sh knngraph --quick   100k x 128 only
#   bench/run_suite.sh graph              approximate k-NN graphs: bench_graph on clustered 100k and 1M x 128
#                                         (GNND p sweep at k 32/64, GGM, out of core, FAISS NN-Descent, the
#                                         exact GPU graph) and the real sets (within FX_GRAPH_BUDGET, at most ~7.7 minutes)
#   bench/run_suite.sh graph --quick      100k x 128 and siftsmall only
#   bench/run_suite.sh lsh                Bi-level LSH: bench_lsh on siftsmall, the point cloud, fashion-mnist
#                                         (Debian's IDX files) and clustered 1M x 128 with nq = 10k: ours (build
#                                         and search sweeps), the exact GPU anchor, the CPU twin on one thread,
#                                         FAISS IndexLSH and IndexHNSWFlat on all cores, heap vs work queue by k
#   bench/run_suite.sh lsh --quick        siftsmall and clustered 100k only
#                                         (FX_LSH_SETS picks the sets; FX_LSH_BUDGET bounds the suite, default 480 s)
#   bench/run_suite.sh multi              exact k=10 search of clustered 10M x 128 (nq 10k) on one GPU, sharded and
#                                         replicated over FX_MULTI_DEVICES (default 0,1): bench_multi_gpu; results in
#                                         bench/results/multigpu.jsonl (FX_MULTI_NB overrides nb)
#   bench/run_suite.sh multi --quick      200k x 128, nq 2k, on GPU 0 listed twice (a smoke test on one GPU)
#
# Programs come from $FX_BENCH_BIN, else .device/bin/bench (staged), else
# build-bench/bench, else build/bench. Real data sets are looked up in
# $FX_DATA_DIR, .device/extra, ../shared/data/* and /usr/share/datasets/fashion-mnist
# (.gz variants too) and skipped when absent. Generated data goes to
# $FX_BENCH_TMP (default /tmp/faiss_ext_bench) and is deleted after use.
set -uo pipefail
suite=${1:-}
shift || true
quick=0
[ "${1:-}" = "--quick" ] && quick=1
cd "$(dirname "${BASH_SOURCE[0]}")/.."
case "$suite" in
  flat) prog=bench_flat ;;
  select) prog=bench_select ;;
  knngraph) prog=bench_knngraph ;;
  graph) prog=bench_graph ;;
  lsh) prog=bench_lsh ;;
  multi|multigpu) suite=multigpu; prog=bench_multi_gpu ;;
  *) echo "usage: bench/run_suite.sh flat|select|knngraph|graph|lsh|multi [--quick]" >&2; exit 2 ;;
esac

# Python (torch) runs with the environment as it was: the staged Debian
# libraries (zlib, gomp, ...) that env.sh puts first are for our programs.
py_ld_path=${LD_LIBRARY_PATH:-}
[ -f .device/env.sh ] && source .device/env.sh
bin=${FX_BENCH_BIN:-}
for cand in .device/bin/bench build-bench/bench build/bench; do
  [ -z "$bin" ] && [ -x "$cand/$prog" ] && bin=$cand
done
[ -n "$bin" ] && [ -x "$bin/$prog" ] || { echo "$prog not found (stage it: bench/stage.sh)" >&2; exit 2; }
py=${FX_PYTHON:-python3}
tmp=${FX_BENCH_TMP:-/tmp/faiss_ext_bench}
mkdir -p "$tmp" bench/results
results=bench/results/$suite.jsonl
new=$tmp/${suite}_new.jsonl
log=$tmp/$suite.log
: > "$new"
: > "$log"

# FAISS's CPU anchor: all cores; passive OpenMP waiting so that OpenMP's idle
# threads do not spin against OpenBLAS's (bench_flat also tries 3 splits per k).
ncpu=$(nproc)
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-$ncpu}
export OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-$ncpu}
export FAISS_EXT_GIT=${FAISS_EXT_GIT:-$("$bin/$prog" --git)}
export PYTHONUNBUFFERED=1
step_timeout=${FX_STEP_TIMEOUT:-300}
start=$(date +%s)
failed=0

say() { echo "[run_suite +$(( $(date +%s) - start ))s] $*" | tee -a "$log" >&2; }
publish() {  # copy what we have to $OUT after every step
  if [ -n "${OUT:-}" ]; then cp "$new" "$OUT/${suite}_new.jsonl"; cp "$log" "$OUT/$suite.log"; fi
}
run() {  # run CMD...: JSON lines to $new, progress to the log; cut at $suite_deadline when set
  local t=$step_timeout
  if [ -n "${suite_deadline:-}" ]; then
    local left=$(( suite_deadline - $(date +%s) ))
    if [ $left -lt 30 ]; then say "budget spent: skipped $*"; failed=1; return; fi
    [ $left -ge "$t" ] || t=$left
  fi
  say "$*"
  timeout "$t" "$@" >> "$new" 2> >(tee -a "$log" >&2)
  local st=$?
  [ $st -eq 0 ] || { say "FAILED (status $st): $*"; failed=1; }
  publish
}
find_data() {  # find_data NAME: first existing path among the data folders
  local dir name=$1
  for dir in "${FX_DATA_DIR:-}" .device/extra ../shared/data/siftsmall ../shared/data/pointcloud-rs \
             ../shared/data/fashion-mnist /usr/share/datasets/fashion-mnist; do
    [ -n "$dir" ] || continue
    for f in "$dir/$name" "$dir/$name.gz"; do [ -f "$f" ] && { echo "$f"; return 0; }; done
  done
  return 1
}
bench_pair() {  # bench_pair DATASET BASE QUERY KS: bench_flat, then torch on the same files
  local ds=$1 base=$2 query=$3 ks=$4
  run "$bin/bench_flat" --base "$base" --query "$query" --dataset "$ds" --k "$ks" \
      --reps 3 --cpu-budget "${FX_CPU_BUDGET:-3}" --recall-nq 256 --ref-out "$tmp/ref" \
      --precision "${FX_FLAT_PRECISION:-fp32}"
  if [ -f "$tmp/ref.ivecs" ]; then
    run env LD_LIBRARY_PATH="$py_ld_path" "$py" bench/torch_flat.py --base "$base" --query "$query" --dataset "$ds" --k "$ks" \
        --reps 3 --ref "$tmp/ref.ivecs"
  else
    say "no reference from bench_flat: torch skipped for $ds"; failed=1
  fi
  rm -f "$tmp/ref.ivecs"
}

{
  echo "== $suite suite, commit $FAISS_EXT_GIT, $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "== programs: $bin; python: $py; OMP_NUM_THREADS=$OMP_NUM_THREADS OPENBLAS_NUM_THREADS=$OPENBLAS_NUM_THREADS OMP_WAIT_POLICY=$OMP_WAIT_POLICY"
  nvidia-smi -L 2>&1 || echo "nvidia-smi: not available"
  LD_LIBRARY_PATH="$py_ld_path" "$py" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)' 2>&1
} | tee -a "$log" >&2

finish() {
  cat "$new" >> "$results"
  publish
  say "done: $(wc -l < "$new") lines appended to $results$([ $failed = 1 ] && echo ', SOME STEPS FAILED (see the log)')"
  exit $failed
}
pyrun() {  # pyrun SCRIPT ARGS...: torch's python with the environment as it was
  run env LD_LIBRARY_PATH="$py_ld_path" "$py" "$@"
}

# ---- suite select: per nq, ours (all algorithms + the read floor), then torch on the same matrices ----
if [ "$suite" = select ]; then
  # TH-heap's time budget is per bench_select process (one per nq).
  sel_args=(--reps "${FX_SELECT_REPS:-5}" --thheap-budget "${FX_THHEAP_BUDGET:-60}" --seed 1)
  tsel_args=(--reps "${FX_SELECT_REPS:-5}" --seed 1)
  if [ $quick = 1 ]; then
    run "$bin/bench_select" --quick "${sel_args[@]}"
    pyrun bench/torch_select.py --quick "${tsel_args[@]}"
  else
    for nq in ${FX_SELECT_NQ:-1 64 2048 8192}; do
      run "$bin/bench_select" --nq "$nq" "${sel_args[@]}"
      pyrun bench/torch_select.py --nq "$nq" "${tsel_args[@]}"
    done
  fi
  finish
fi

# ---- suite multigpu: exact search on one GPU vs sharded / replicated over several ----
if [ "$suite" = multigpu ]; then
  if [ $quick = 1 ]; then
    run "$bin/bench_multi_gpu" --nb 200k --nq 2k --k 10 --devices "${FX_MULTI_DEVICES:-0,0}"
  else
    run "$bin/bench_multi_gpu" --nb "${FX_MULTI_NB:-10M}" --d 128 --nq 10k --k 10 --reps 5 \
        --devices "${FX_MULTI_DEVICES:-0,1}"
  fi
  finish
fi

# ---- suite knngraph: exact k-NN graph (k = 10, itself excluded) of clustered 128-d sets ----
if [ "$suite" = knngraph ]; then
  if [ $quick = 1 ]; then ns="100000"; else ns="${FX_KNNGRAPH_N:-100000 1000000}"; fi
  for n in $ns; do
    prefix=$tmp/clustered_${n}_128
    # The base set of the flat suite's clustered n x 128 (same seed and clusters); queries unused.
    run "$bin/gen_clustered" --nb "$n" --nq 1 --d 128 --seed 1234 --out "$prefix"
    if [ -f "${prefix}_base.fbin" ]; then
      rm -f "$tmp/torch_graph_ids.ivecs"
      pyrun bench/torch_knngraph.py --base "${prefix}_base.fbin" --dataset clustered --k 10 \
          --reps 3 --budget 30 --recall-rows 512 --ids-out "$tmp/torch_graph_ids.ivecs"
      tids=()
      [ -f "$tmp/torch_graph_ids.ivecs" ] && tids=(--torch-ids "$tmp/torch_graph_ids.ivecs")
      run "$bin/bench_knngraph" --base "${prefix}_base.fbin" --dataset clustered --k 10 \
          --reps 3 --budget 30 --recall-rows 512 "${tids[@]}"
      rm -f "$tmp/torch_graph_ids.ivecs"
    fi
    rm -f "${prefix}_base.fbin" "${prefix}_query.fbin"
  done
  finish
fi

# ---- suite lsh: Bi-level LSH against the exact GPU search, the CPU twin, FAISS IndexLSH and HNSW ----
if [ "$suite" = lsh ]; then
  # FX_LSH_SETS picks the data sets (a device call has 10 minutes): default all four.
  # FX_LSH_BUDGET (seconds, default 480): a step is stopped when the budget is
  # spent (the lines it printed are kept) and skipped when less than 30 s are left.
  suite_deadline=$(( start + ${FX_LSH_BUDGET:-480} ))
  sets=" ${FX_LSH_SETS:-siftsmall pointcloud fashion big} "
  want() { [[ "$sets" == *" $1 "* ]]; }
  if ! want siftsmall; then :
  elif b=$(find_data siftsmall_base.fvecs) && q=$(find_data siftsmall_query.fvecs); then
    run "$bin/bench_lsh" --base "$b" --query "$q" --dataset siftsmall \
        --builds d0w2.0L10M8,d2w2.0L10M8 --settings g1p1m0,g1p4m0,g1p16m0,g1p64m0,g2p4m0,g2p16m0,g2p64m0 \
        --wq-k 1,10,100,500
  else say "siftsmall not found: skipped"; fi
  # 1M set (CPU twin, 500 queries): d0w0.9L16M12 reached recall@10 0.93 with 814 candidates
  # per query at nprobe 8, d0w0.75L16M10 0.92 with 823; the L10 M8 builds need 1900-3900
  if [ $quick = 0 ]; then
    if ! want pointcloud; then :
    elif b=$(find_data rs1_base.fvecs) && q=$(find_data rs22_query.fvecs); then
      run "$bin/bench_lsh" --base "$b" --query "$q" --dataset pointcloud-rs --max-nq 10000 \
          --builds d4w0.2L10M2,d2w0.2L10M2 --settings g1p1m0,g2p3m0,g4p1m0,g4p3m0,g4p5m0,g4p9m0
    else say "point cloud not found: skipped"; fi
    fm=()
    if b=$(find_data train-images-idx3-ubyte) && q=$(find_data t10k-images-idx3-ubyte); then fm=("$b" "$q" fashion-mnist)
    elif b=$(find_data fashion-mnist_base15k.bvecs) && q=$(find_data fashion-mnist_query1k.bvecs); then
      fm=("$b" "$q" fashion-mnist-15k)  # the first 15k / 1k rows (what fits the device tool's 64 MiB)
    fi
    if ! want fashion; then :
    elif [ ${#fm[@]} = 3 ]; then
      run "$bin/bench_lsh" --base "${fm[0]}" --query "${fm[1]}" --dataset "${fm[2]}" \
          --builds d2w2.0L10M10 --settings g1p4m0,g3p1m0,g3p4m0,g3p16m0,g3p32m0
    else say "fashion-mnist not found: skipped"; fi
    want big && run "$bin/bench_lsh" --gen "${FX_LSH_BIG_N:-1000000}" --nq 10000 --d 128 --seed 1234 --dataset clustered-1M \
        --builds d0w1.0L10M8,d0w0.75L10M8,d0w0.9L16M12,d0w0.75L16M10,d2w1.0L10M8 \
        --settings g1p1m0,g1p2m0,g1p3m0,g1p4m0,g1p6m0,g1p8m0,g1p16m0,g2p2m0,g2p4m0 \
        --nq-cpu 200
  else
    run "$bin/bench_lsh" --gen 100000 --nq 2000 --d 128 --seed 1234 --dataset clustered-100k \
        --builds d0w1.0L10M8 --settings g1p1m0,g1p2m0,g1p4m0 --nq-cpu 100
  fi
  finish
fi

# ---- suite graph: approximate k-NN graphs (GNND, GGM, out of core) against FAISS NN-Descent and exact ----
if [ "$suite" = graph ]; then
  # The whole suite stays within FX_GRAPH_BUDGET seconds: FAISS's CPU NN-Descent
  # runs a setting only when its estimate (from the earlier FAISS runs of this
  # suite, scaled by n x iterations x max(d, 32)) fits both FX_GRAPH_FAISS_MAX
  # and what is left of the budget; each step is stopped past the budget.
  budget=${FX_GRAPH_BUDGET:-400}
  deadline=$(( start + budget ))
  cost=$tmp/graph_faiss_cost.txt
  rm -f "$cost"
  gargs=(--ks "${FX_GRAPH_KS:-32,64}" --samples "${FX_GRAPH_SAMPLES:-8,12,16,24,32}" --faiss-K 64
         --faiss-max "${FX_GRAPH_FAISS_MAX:-600}" --faiss-deadline "$deadline" --faiss-cost-file "$cost" --tmp "$tmp")
  graph_step() {  # graph_step ARGS...: bench_graph, stopped at the budget's end (+60 s for the last lines)
    local left=$(( deadline + 60 - $(date +%s) ))
    if [ $left -lt 30 ]; then say "budget spent: skipped bench_graph $*"; failed=1; return; fi
    step_timeout=$left run "$bin/bench_graph" "$@" "${gargs[@]}"
  }
  real_set() {  # real_set NAME BASE [GT]: ours, the exact anchor, FAISS at iter 10 only
    local gt=()
    [ -n "${3:-}" ] && gt=(--gt "$3")
    graph_step --base "$2" --dataset "$1" "${gt[@]}" --methods exact,ours,faiss --faiss-iters "${FX_GRAPH_REAL_ITERS:-10}"
  }
  graph_step --gen 100000 --d 128 --seed 1234 --dataset clustered --methods exact,ours,faiss --faiss-iters 10,20
  if b=$(find_data siftsmall_base.fvecs); then
    real_set siftsmall "$b" "$(find_data siftsmall_base_knn100_l2.ivecs || true)"
  else say "siftsmall not found: skipped"; fi
  if [ $quick = 0 ]; then
    if b=$(find_data rs1_base.fvecs); then
      real_set pointcloud-rs "$b" "$(find_data rs1_base_knn32_l2.ivecs || true)"
    else say "point cloud (rs1_base.fvecs) not found: skipped"; fi
    if b=$(find_data fashion-mnist_base.bvecs); then
      real_set fashion-mnist "$b" "$(find_data fashion-mnist_base_knn100_l2.ivecs || true)"
    elif b=$(find_data train-images-idx3-ubyte); then
      real_set fashion-mnist "$b" "$(find_data fashion-mnist_base_knn100_l2.ivecs || true)"
    else say "fashion-mnist not found: skipped"; fi
    # Last: the 1M set (ours, GGM, out of core, then FAISS if its estimate fits what is left).
    graph_step --gen "${FX_GRAPH_BIG_N:-1000000}" --d 128 --seed 1234 --dataset clustered \
        --methods exact,ours,ggm,ooc,faiss --faiss-iters 10,20 --ggm-k 32 --ooc-k 32 --ooc-shards 4
  fi
  rm -f "$cost"
  finish
fi

# ---- suite flat: generated clustered sets ----
if [ $quick = 1 ]; then nbs="100000"; ds_="128"; ks="10,100,1024"; else nbs="100000 1000000"; ds_="128 960"; ks="1,10,100,1024,4096"; fi
for nb in $nbs; do
  for d in $ds_; do
    prefix=$tmp/clustered_${nb}_$d
    run "$bin/gen_clustered" --nb "$nb" --nq 10000 --d "$d" --seed 1234 --out "$prefix"
    if [ -f "${prefix}_base.fbin" ]; then
      bench_pair clustered "${prefix}_base.fbin" "${prefix}_query.fbin" "$ks"
    fi
    rm -f "${prefix}_base.fbin" "${prefix}_query.fbin"
  done
done

# ---- real sets, when present ----
if b=$(find_data siftsmall_base.fvecs) && q=$(find_data siftsmall_query.fvecs); then
  bench_pair siftsmall "$b" "$q" "$ks"
else say "siftsmall not found: skipped"; fi
if [ $quick = 0 ]; then
  if b=$(find_data rs1_base.fvecs) && q=$(find_data rs22_query.fvecs); then
    bench_pair pointcloud-rs "$b" "$q" "$ks"
  else say "point cloud (rs1_base.fvecs, rs22_query.fvecs) not found: skipped"; fi
  if b=$(find_data fashion-mnist_base.bvecs) && q=$(find_data fashion-mnist_query.bvecs); then
    bench_pair fashion-mnist "$b" "$q" "$ks"
  elif b=$(find_data train-images-idx3-ubyte) && q=$(find_data t10k-images-idx3-ubyte); then
    bench_pair fashion-mnist "$b" "$q" "$ks"
  else say "fashion-mnist not found: skipped"; fi
fi

finish
