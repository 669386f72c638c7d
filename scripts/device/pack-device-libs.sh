# Sourced by the bench staging scripts (bench/stage_ann.sh,
# bench/stage_flat_scale.sh) after ../shared/tools/device-stage has filled
# .device: the shared libraries travel xz-compressed (they would not fit in
# the device tool's 64 MiB as they are) and .device/env.sh unpacks them into
# /tmp/devlib-<checksum>, linked as /tmp/devlib, on the GPU machine.
#   fx_pack_device_libs            # .device/lib -> .device/libs.tar.xz, writes .device/env.sh
#   fx_add_anchor_kit KIT_DIR      # the faiss-gpu anchor kit (make-kit output) -> .device/anchor

fx_pack_device_libs() {
  rm -f .device/bin/libfaiss_ext.so*
  tar -cJf .device/libs.tar.xz -C .device/lib . && rm -rf .device/lib
  # env.sh unpacks once per archive, into /tmp/devlib-<checksum>, renamed
  # into place whole and linked as /tmp/devlib: scripts run side by side
  # (several device-sanitize.sh at once) source it together, and an unpack
  # into one shared directory had them delete each other's libraries
  cat > .device/env.sh <<'ENV'
d=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
s=$(cksum < "$d/libs.tar.xz" | tr ' ' -)
if [ ! -e "/tmp/devlib-$s/.done" ]; then
  t=$(mktemp -d /tmp/devlib-unpack.XXXXXX)
  tar -xJf "$d/libs.tar.xz" -C "$t" && touch "$t/.done"
  mv -T "$t" "/tmp/devlib-$s" 2>/dev/null || rm -rf "$t"
fi
if [ -d /tmp/devlib ] && [ ! -L /tmp/devlib ]; then rm -rf /tmp/devlib; fi
ln -sfn "/tmp/devlib-$s" "/tmp/devlib.$$" && mv -T "/tmp/devlib.$$" /tmp/devlib
export LD_LIBRARY_PATH="/tmp/devlib-$s:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export PATH="$d/bin:$PATH"
ENV
}

fx_add_anchor_kit() {
  mkdir -p .device/anchor && cp "$1/faiss-gpu-anchor.tgz" "$1/faiss-gpu-anchor-env.sh" .device/anchor/
}
