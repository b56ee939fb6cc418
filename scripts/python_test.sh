#!/usr/bin/env bash
# CI: duet's Python tests (python/tests) with Debian's torch (1.13, CPU) on
# the host backend. Installs python3-torch, python3-pytest,
# python3-setuptools, python3-pip and python3-venv where missing.
#
# The package is installed with `pip install --no-build-isolation .` into a
# virtual environment that sees the system packages, and the tests run
# against it from outside the source tree, with no DUET_LIBRARY.
#
# Environment:
#   DUET_LIBRARY   a libduet already built (CI's build/libduet.so): bundled into
#                  the package as it is (DUET_PREBUILT_LIBRARY) instead of a
#                  host-only CMake build
#   PYTHON         interpreter (default /usr/bin/python3: Debian's, which has torch)
# Tests that need a newer torch (custom_op, torch.compile, torch.export) or
# a GPU are skipped with their reason shown (-rs).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
py=${PYTHON:-/usr/bin/python3}

missing=()
for pkg in python3-torch python3-pytest python3-setuptools python3-pip python3-venv; do
  dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
done
if ((${#missing[@]})); then
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  echo "python_test: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

pytest_args=(-q -rs -p no:cacheprovider "$root/python/tests")
work=$(mktemp -d "${TMPDIR:-/tmp}/duet-python-test.XXXXXX")
trap 'rm -rf "$work"' EXIT
echo "+ $py -m venv --system-site-packages $work/venv"
"$py" -m venv --system-site-packages "$work/venv"
if [[ -n "${DUET_LIBRARY:-}" ]]; then
  echo "+ DUET_PREBUILT_LIBRARY=$DUET_LIBRARY pip install --no-build-isolation --no-deps ."
  DUET_PREBUILT_LIBRARY=$(realpath "$DUET_LIBRARY") \
    "$work/venv/bin/python" -m pip install -q --no-build-isolation --no-deps "$root"
else
  echo "+ pip install --no-build-isolation --no-deps . (host backend only)"
  DUET_CMAKE_ARGS="${DUET_CMAKE_ARGS:--DDUET_ENABLE_CUDA=OFF -DDUET_ENABLE_HIP=OFF}" \
    "$work/venv/bin/python" -m pip install -q --no-build-isolation --no-deps "$root"
fi
unset DUET_LIBRARY
cd "$work"
"$work/venv/bin/python" -c "import duet; print(f'duet {duet.__version__} from {duet.library_path()}: {duet.devices()}')"
echo "+ python -m pytest ${pytest_args[*]}"
"$work/venv/bin/python" -m pytest "${pytest_args[@]}"
