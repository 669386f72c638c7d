# Shared set-up of scripts/demo.sh, scripts/test.sh and .ci/run (sourced, not run).
#   fx_install_deps      apt-get install what is missing (skipped when all is there)
#   fx_check_nvcc        CUDA's nvcc at /usr/local/cuda/bin, or a clear error
#   fx_build             configure + build into $FX_BUILD_DIR (default: build)
# Settings (environment): FX_BUILD_DIR, CUDA_ARCH (default 90), FX_JOBS (default nproc),
# FX_SKIP_APT=1 (never call apt-get), FX_CMAKE_ARGS (extra cmake arguments).

FX_PACKAGES=(cmake g++ make libfaiss-dev libopenblas-dev libgtest-dev pybind11-dev python3-dev
             python3-numpy python3-pytest python3-faiss zlib1g-dev dataset-fashion-mnist
             swig python3-venv python3-pip  # SWIG's runtime header; `pip install .` (docs/python.md)
             clang libclang-rt-14-dev libomp-dev llvm-14)  # last four: fuzz/ (docs/fuzzing.md)
FX_BUILD_DIR=${FX_BUILD_DIR:-build}
FX_NVCC=${FX_NVCC:-/usr/local/cuda/bin/nvcc}
# FAISS's CPU search runs OpenMP heaps beside OpenBLAS's own threads; spinning
# OpenMP threads starve OpenBLAS's (10x slower on 2 cores), so they sleep instead.
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}

fx_log() { printf '\n==> %s\n' "$*"; }
fx_die() { printf '\nERROR: %s\n' "$*" >&2; exit 1; }

fx_missing_packages() {
  local p missing=()
  for p in "${FX_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
  echo "${missing[@]:-}"
}

fx_install_deps() {
  command -v dpkg-query >/dev/null || fx_die "this set-up expects Debian 12 (dpkg and apt-get not found)"
  local missing; missing=$(fx_missing_packages)
  if [ -z "$missing" ]; then
    fx_log "Debian packages: all present (${#FX_PACKAGES[@]} checked), apt-get skipped"
    return 0
  fi
  [ "${FX_SKIP_APT:-0}" = 1 ] && fx_die "missing Debian packages: $missing (FX_SKIP_APT=1, so not installing)"
  local sudo=()
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || fx_die "missing packages ($missing) and not root, and sudo is not installed: run as root: apt-get install $missing"
    sudo=(sudo)
  fi
  fx_log "Installing missing Debian packages: $missing"
  export DEBIAN_FRONTEND=noninteractive
  # shellcheck disable=SC2086
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q &&
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $missing ||
    fx_die "apt-get failed to install: $missing"
}

fx_check_nvcc() {
  if [ ! -x "$FX_NVCC" ]; then
    fx_die "CUDA's compiler was not found at $FX_NVCC.
faiss_ext needs the CUDA toolkit (CUDA 13, with nvcc and cuBLAS) in /usr/local/cuda even to
build and run on a machine without a GPU. Debian does not package CUDA 13: install NVIDIA's
CUDA toolkit for Debian 12 (https://developer.nvidia.com/cuda-downloads, package cuda-toolkit-13-0)
so that /usr/local/cuda/bin/nvcc exists, or set FX_NVCC=/path/to/nvcc, then run this again."
  fi
  export PATH="$(dirname "$FX_NVCC"):$PATH"
  export CUDACXX="$FX_NVCC"
  echo "nvcc: $("$FX_NVCC" --version | tail -n 2 | head -n 1)"
}

fx_build() {
  local jobs=${FX_JOBS:-$(nproc)}
  fx_log "Configuring $FX_BUILD_DIR (Release, CUDA arch ${CUDA_ARCH:-90})"
  # shellcheck disable=SC2086
  cmake -S . -B "$FX_BUILD_DIR" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCH:-90}" -DCMAKE_CUDA_COMPILER="$FX_NVCC" \
    ${FX_CMAKE_ARGS:-} || fx_die "cmake configure failed"
  fx_log "Building with $jobs jobs (the CUDA files take a while on few cores)"
  cmake --build "$FX_BUILD_DIR" -j "$jobs" || fx_die "build failed"
}
