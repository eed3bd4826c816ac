#!/usr/bin/env bash
# Regenerate the checked-in Python code for every .proto under hook/gpuhook.
#
# For hook/gpuhook/<pkg>/<name>.proto this writes, next to it:
#   <name>_pb2.py, <name>_pb2.pyi, <name>_pb2_grpc.py
# protoc runs with -I hook and the proto path relative to hook/, so the
# generated imports are package-absolute (from gpuhook.<pkg> import <name>_pb2).
#
# Usage: bash tools/regen-protos.sh   (from anywhere; needs .venv with grpcio-tools)
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

python="${PYTHON:-$root/.venv/bin/python}"
if ! "$python" -c 'import grpc_tools.protoc' 2>/dev/null; then
    echo "regen-protos: $python cannot import grpc_tools; run: .venv/bin/pip install -e '.[test]'" >&2
    exit 1
fi

mapfile -t protos < <(cd hook && find gpuhook -name '*.proto' -type f | LC_ALL=C sort)
if [[ ${#protos[@]} -eq 0 ]]; then
    echo "regen-protos: no .proto files under hook/gpuhook" >&2
    exit 1
fi

for proto in "${protos[@]}"; do
    echo "regen-protos: $proto"
    "$python" -m grpc_tools.protoc \
        -I hook \
        --python_out=hook \
        --pyi_out=hook \
        --grpc_python_out=hook \
        "$proto"
done
