#!/usr/bin/env bash
# Builds a kit that brings Ray (for faiss_ext.distributed's GPU-actor tests
# and bench, issue 40) to the GPU machine, whose python3 is 3.12 and which
# has no package registry:
#   bash scripts/device/make-ray-kit.sh OUT_DIR   -> OUT_DIR/ray-kit.txz, OUT_DIR/ray-env.sh
# Ray's cp312 wheel and its dependencies, unpacked, without the parts the
# tests never import (Java jars, RLlib, Tune, Serve, Data, Train), xz-packed
# (about 33 MB). The Python module's stage (.pyd, .whl, .pyfaiss: about 50
# MB) does not fit beside it, so bring it in two calls back to back (the
# machine keeps /tmp about 30 s between calls):
#   call 1 (carry OUT_DIR):  source OUT_DIR/ray-env.sh   (unpacks into /tmp/ray-site)
#   call 2 (carry .pyd .whl .pyfaiss): FX_SKIP_CONVERSION=1 bash scripts/device/device-python-tests.sh \
#           -q python_bindings/tests/test_gpu_distributed.py  with FX_EXTRA_PYTHONPATH=/tmp/ray-site
# ray-env.sh puts /tmp/ray-site on PYTHONPATH (ahead of site-packages).
# filelock and typing-extensions are left out: torch, which the GPU
# machine's python has, brings them, and a second copy would shadow torch's.
set -euo pipefail
out=$(readlink -f "${1:?usage: make-ray-kit.sh OUT_DIR}")
w=$(mktemp -d); trap 'rm -rf "$w"' EXIT
dl() { python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  -d "$w/whl" "$@"; }
dl "ray>=2.40,<3" click jsonschema jsonschema-specifications referencing rpds-py attrs \
   "msgpack>=1,<2" packaging "protobuf>=3.20,<6" pyyaml aiosignal frozenlist requests idna \
   charset-normalizer urllib3 certifi
mkdir -p "$w/site"
for f in "$w"/whl/*.whl; do unzip -q -o "$f" -d "$w/site"; done
rm -rf "$w"/site/ray/jars "$w"/site/ray/rllib "$w"/site/ray/tune "$w"/site/ray/serve \
       "$w"/site/ray/data "$w"/site/ray/train
mkdir -p "$out"
tar -cf - -C "$w/site" . | xz -T2 -6 > "$out/ray-kit.txz"
cat > "$out/ray-env.sh" <<'ENV'
# source on the GPU machine (see make-ray-kit.sh)
k=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
[ -d /tmp/ray-site/ray ] || { mkdir -p /tmp/ray-site && tar -xJf "$k/ray-kit.txz" -C /tmp/ray-site; }
export PYTHONPATH=${PYTHONPATH:+$PYTHONPATH:}/tmp/ray-site
export RAY_USAGE_STATS_ENABLED=0
ENV
ls -la "$out"
