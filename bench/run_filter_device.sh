#!/usr/bin/env bash
# The filter suite's graph part on the GPU machine, one device call (issue 36):
# ours (bench/vdb_ops.py --parts filter, numpy and torch device queries) and,
# each in its own process right after, cuVS CAGRA with its bitset filter and
# cuVS filtered brute force (bench/anchor_cagra_filtered.py), on the L2 1M x
# 128 mixture and the normalized 1M x 384 inner-product mixture.
# Before it, on the device (machine kept warm between the calls):
#   1. ../shared/tools/cuvs-anchor/make-kit DIR here; then two calls carrying
#      cuvs-kit.txz and nvjitlink.xz, each unpacked into /tmp (make-kit's header);
#   2. here: scripts/device/stage-python-tests.sh build-gpu; cp DIR/cuvs-anchor-env.sh .pyd/
# Then, carrying [".pyd", ".whl", ".pyfaiss"]:
#   GITSHA=$(git rev-parse --short HEAD) bash bench/run_filter_device.sh
# FX_FILTER_HNSW=1 adds FAISS CPU IndexHNSWFlat with the same selector (its
# 1M x 384 build alone takes about 95 s on 16 cores).
# Output: $OUT/vdb_{l2,ip}.jsonl and $OUT/cagra_{l2,ip}.jsonl (+ .err), at most 8 files: the
# device returns no more.
set -u
cd "$(dirname "${BASH_SOURCE[0]}")/.."
G=${GITSHA:-unknown}; t0=$(date +%s)
ls -d /tmp/cuvs-site/cuvs /tmp/njl/libnvJitLink.so.13 >/dev/null || { echo "cuVS kit missing in /tmp"; exit 3; }
[ -f .pyd/cuvs-anchor-env.sh ] || { echo ".pyd/cuvs-anchor-env.sh missing (copy it from the kit)"; exit 3; }
# the Python module, built there (scripts/device/device-python-tests.sh), checked on its torch inputs
FX_SKIP_CONVERSION=1 OUT=/tmp timeout 150 bash scripts/device/device-python-tests.sh -q \
  python_bindings/tests/test_gpu_torch_cupy.py
echo "module and tests rc=$? $(( $(date +%s) - t0 )) s"
export LD_LIBRARY_PATH=/tmp/lib:/tmp/site/faiss_cpu.libs:/usr/local/cuda/lib64
export PYTHONPATH=$PWD/.pyfaiss:/tmp/pkg:/tmp/site OMP_WAIT_POLICY=PASSIVE
for M in l2 ip; do
  D=$([ $M = l2 ] && echo 128 || echo 384)
  timeout 200 python3 bench/vdb_ops.py --parts filter --d $D --metric $M --hnsw "${FX_FILTER_HNSW:-0}" \
    --device-queries 1 --git "$G" > "$OUT/vdb_$M.jsonl" 2> "$OUT/vdb_$M.err"
  echo "ours $M rc=$? $(( $(date +%s) - t0 )) s"
  ( unset PYTHONPATH LD_LIBRARY_PATH; source .pyd/cuvs-anchor-env.sh &&
    timeout 150 python3 bench/anchor_cagra_filtered.py --d $D --metric $M --itopk 64,128,256,512 \
      --git "$G" > "$OUT/cagra_$M.jsonl" 2> "$OUT/cagra_$M.err"
    echo "cuVS $M rc=$? $(( $(date +%s) - t0 )) s" )
done
