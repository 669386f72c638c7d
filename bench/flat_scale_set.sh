# Sourced by bench/run_flat_scale_device.sh and bench/profile_fused_device.sh:
# flat_scale_set PREFIX DATA NB NQ D SEED ERR generates issue 39's set into
# PREFIX_base.fbin / PREFIX_query.fbin and sets `name` (the dataset's name in
# the results). DATA far: the hard set far from the origin
# (bench/gen_far_clusters.py, on the GPU; d is 96 whatever D says); DATA
# clustered: bench/gen_clustered's, near the origin, D dimensions and SEED.
# Needs py_ld_path (LD_LIBRARY_PATH before .device/env.sh, for python3) and
# .device/bin. Returns the generator's status.
flat_scale_set() {
  local prefix=$1 data=$2 nb=$3 nq=$4 d=$5 seed=$6 err=$7
  if [ "$data" = clustered ]; then
    name=clustered-$((nb / 1000000))M-$d-seed$seed
    .device/bin/bench/gen_clustered --nb "$nb" --nq "$nq" --d "$d" --seed "$seed" \
      --out "$prefix" 2>> "$err"
  else
    name=far-hard-$((nb / 1000000))M-96-c3000
    env LD_LIBRARY_PATH="$py_ld_path" timeout 300 python3 bench/gen_far_clusters.py --nb "$nb" \
      --nq "$nq" --d 96 --clusters 3000 --out "$prefix" 2>> "$err"
  fi
}
