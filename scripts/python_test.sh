#!/usr/bin/env bash
# CI: duet's Python tests (python/tests) with Debian's torch (1.13, CPU) on
# the host backend. Installs python3-torch, python3-pytest,
# python3-setuptools, python3-pip and python3-venv where missing.
#
# Environment:
#   DUET_LIBRARY   test the source tree against this libduet (CI's build/libduet.so)
#                  instead of building and installing the package
#   PYTHON         interpreter (default /usr/bin/python3: Debian's, which has torch)
# Without DUET_LIBRARY: `pip install --no-build-isolation .` (host backend only)
# into a virtual environment that sees the system packages, then the tests
# against the installed package, from outside the source tree.
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
if [[ -n "${DUET_LIBRARY:-}" ]]; then
  echo "+ DUET_LIBRARY=$DUET_LIBRARY PYTHONPATH=python $py -m pytest ${pytest_args[*]}"
  DUET_LIBRARY=$(realpath "$DUET_LIBRARY") PYTHONPATH=$root/python "$py" -m pytest "${pytest_args[@]}"
  exit
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/duet-python-test.XXXXXX")
trap 'rm -rf "$work"' EXIT
echo "+ $py -m venv --system-site-packages $work/venv"
"$py" -m venv --system-site-packages "$work/venv"
echo "+ pip install --no-build-isolation --no-deps . (host backend only)"
DUET_CMAKE_ARGS="${DUET_CMAKE_ARGS:--DDUET_ENABLE_CUDA=OFF -DDUET_ENABLE_HIP=OFF}" \
  "$work/venv/bin/python" -m pip install -q --no-build-isolation --no-deps "$root"
cd "$work"
"$work/venv/bin/python" -c "import duet; print(f'duet {duet.__version__} from {duet.library_path()}: {duet.devices()}')"
echo "+ python -m pytest ${pytest_args[*]}"
"$work/venv/bin/python" -m pytest "${pytest_args[@]}"
