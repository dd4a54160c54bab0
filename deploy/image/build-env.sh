#!/usr/bin/env bash
# deploy/image/build-env.sh DEST: the image's Python environment (a venv at DEST), built the way the
# Dockerfile builds it and slimmed. CI runs it without a container runtime (.ci/run prints DEST's size).
#   1. wheels of dra-gitops[helm] and its pinned dependencies (pip wheel; WHEELS=dir reuses a wheelhouse)
#   2. an offline install of those wheels into a venv at DEST (no pip left in it)
#   3. slimming: one copy of each shared library (the others symlinks to it), no package nothing of ours
#      imports (the kubernetes client's asyncio twin, test suites), no bytecode caches (compiled once,
#      at the end, for what is left)
# tests/deploy/test_image_env.py imports every module of ours in the result (DRA_GITOPS_IMAGE_ENV=DEST).
set -euo pipefail
if [ $# -ne 1 ]; then
  echo "usage: $0 DEST" >&2
  exit 2
fi
dest="$1"
root="$(cd "$(dirname "$0")/../.." && pwd)"
python="${PYTHON:-python3}"
wheels="${WHEELS:-}"
if [ -z "$wheels" ]; then
  wheels="$(mktemp -d)"
  trap 'rm -rf "$wheels"' EXIT
fi

echo "+ wheels of dra-gitops[helm] into $wheels" >&2
"$python" -m pip wheel --quiet --wheel-dir "$wheels" "$root[helm]"

echo "+ offline install into $dest" >&2
"$python" -m venv --clear "$dest"
"$dest/bin/python" -m pip install --quiet --no-index --find-links "$wheels" --no-compile "dra-gitops[helm]"
"$dest/bin/python" -m pip uninstall --quiet --yes pip setuptools wheel >/dev/null 2>&1 || true

site="$("$dest/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
echo "+ slimming $site" >&2
# The kubernetes client's asyncio package: nothing of ours imports it (tests/deploy/test_image_env.py).
rm -rf "$site/kubernetes/aio" "$site/kubernetes/test" "$site/kubernetes/e2e_test"
# Test suites and type stubs shipped inside packages.
find "$site" -depth -type d \( -name tests -o -name test \) -path "*/site-packages/*/*" -prune -exec rm -rf {} +
find "$site" -name '*.pyi' -delete
find "$site" -depth -type d -name __pycache__ -exec rm -rf {} +
# Shared libraries shipped as several identical copies (helm-python-sdk's libhelm_c.so, .so.0,
# .so.0.2.2): the first kept, the others symlinks to it.
"$dest/bin/python" - "$site" <<'PY'
import hashlib, os, sys
from pathlib import Path

seen: dict[tuple[int, str], Path] = {}
for path in sorted(Path(sys.argv[1]).rglob("*.so*")):
    if path.is_symlink() or not path.is_file():
        continue
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    key = (path.stat().st_size, digest)
    first = seen.setdefault(key, path)
    if first != path:
        path.unlink()
        path.symlink_to(os.path.relpath(first, path.parent))
        print(f"  {path.name} -> {first.name}", file=sys.stderr)
PY
"$dest/bin/python" -m compileall -q -j 0 "$site" >/dev/null || true
du -sh "$dest" >&2
