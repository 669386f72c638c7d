set -u
source .device/env.sh
mkdir -p $OUT /tmp/ann
G=${GITSHA:-unknown}
export FAISS_EXT_GIT=$G
for ds in fmnist clustered hard fmnist-aug-pca fmnist-aug; do mkdir -p /tmp/ann/$ds; timeout 120 .device/bin/bench/bench_ann --data $ds --fmnist-dir .device/extra --write-dir /tmp/ann/$ds --entry-seeds 0,8 --width 1,2 --itopk 32,64,128,256 >> $OUT/ann.jsonl 2>> $OUT/ann.err; echo "$ds rc=$?"; done
for ds in clustered hard; do timeout 60 .device/bin/bench/bench_ann --data $ds --graph-degree 64 --knn-degree 128 --entry-seeds 8,32 --width 1 --itopk 32,64,128 --latency 50 >> $OUT/ann_deg64.jsonl 2>> $OUT/ann.err; echo "$ds deg64 rc=$?"; done
mkdir -p /tmp/fcl; for pair in libopenblaso-r0-d77a1985.3.15.so:libopenblas.so.0 libgfortran-83c28eba.so.5.0.0:libgfortran.so.5 libgomp-e985bcbb.so.1.0.0:libgomp.so.1 libquadmath-2284e583.so.0.0.0:libquadmath.so.0; do ln -sf /tmp/devlib/${pair#*:} /tmp/fcl/${pair%%:*}; done
(source .device/anchor/faiss-gpu-anchor-env.sh .device/anchor/faiss-gpu-anchor.tgz /tmp/fcl && timeout 420 python3 bench/anchor_ann.py --git $G --dirs /tmp/ann/fmnist,/tmp/ann/clustered,/tmp/ann/hard,/tmp/ann/fmnist-aug-pca,/tmp/ann/fmnist-aug >> $OUT/anchors.jsonl 2>> $OUT/anchors.err; echo "anchors rc=$?")
tail -3 $OUT/anchors.err $OUT/ann.err
python3 bench/ann_summary.py $OUT/ann.jsonl $OUT/ann_deg64.jsonl $OUT/anchors.jsonl
