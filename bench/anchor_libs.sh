# Sourced by the device scripts that run the faiss-gpu anchor kit
# (../shared/tools/faiss-gpu-anchor): its libfaiss.so links against the
# wheel's library names, served here by the Debian libraries the staging
# unpacked into /tmp/devlib, as symbolic links in DIR (default /tmp/fcl),
# the directory the kit's env script is given.
fx_anchor_libs() {
  local dir=${1:-/tmp/fcl} pair
  mkdir -p "$dir"
  for pair in libopenblaso-r0-d77a1985.3.15.so:libopenblas.so.0 \
              libgfortran-83c28eba.so.5.0.0:libgfortran.so.5 \
              libgomp-e985bcbb.so.1.0.0:libgomp.so.1 \
              libquadmath-2284e583.so.0.0.0:libquadmath.so.0; do
    [ -e "/tmp/devlib/${pair#*:}" ] && ln -sf "/tmp/devlib/${pair#*:}" "$dir/${pair%%:*}"
  done
  return 0
}
