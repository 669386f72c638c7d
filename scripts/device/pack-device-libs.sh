# Sourced by the bench staging scripts (bench/stage_ann.sh,
# bench/stage_flat_scale.sh) after ../shared/tools/device-stage has filled
# .device: the shared libraries travel xz-compressed (they would not fit in
# the device tool's 64 MiB as they are) and .device/env.sh unpacks them into
# /tmp/devlib on the GPU machine.
#   fx_pack_device_libs            # .device/lib -> .device/libs.tar.xz, writes .device/env.sh
#   fx_add_anchor_kit KIT_DIR      # the faiss-gpu anchor kit (make-kit output) -> .device/anchor

fx_pack_device_libs() {
  rm -f .device/bin/libfaiss_ext.so*
  tar -cJf .device/libs.tar.xz -C .device/lib . && rm -rf .device/lib
  cat > .device/env.sh <<'ENV'
d=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
rm -rf /tmp/devlib && mkdir -p /tmp/devlib && tar -xJf "$d/libs.tar.xz" -C /tmp/devlib
export LD_LIBRARY_PATH="/tmp/devlib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export PATH="$d/bin:$PATH"
ENV
}

fx_add_anchor_kit() {
  mkdir -p .device/anchor && cp "$1/faiss-gpu-anchor.tgz" "$1/faiss-gpu-anchor-env.sh" .device/anchor/
}
