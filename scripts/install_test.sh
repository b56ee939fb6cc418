#!/usr/bin/env bash
# Checks duet as a downstream user gets it: builds the `host` preset, installs
# it into a temporary prefix, builds examples/consumer (a separate CMake
# project: find_package(duet CONFIG REQUIRED), duet::runtime, a C++ and a C11
# program) against that prefix alone, and runs both consumers, the installed
# deviceinfo, and the Python binding on the installed libduet. No GPU needed.
#
# Environment:
#   DUET_KEEP_INSTALL=1   keep the temporary prefix and consumer build (printed)
#   DUET_SKIP_BUILD=1     install the existing build-host/ without rebuilding
#   PYTHON                interpreter for the Python check (default python3; skipped if absent)
# Exit status: 0 when everything passed, non-zero at the first failure.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

work=$(mktemp -d "${TMPDIR:-/tmp}/duet-install-test.XXXXXX")
prefix=$work/prefix
consumer_build=$work/consumer
cleanup() {
  local rc=$?
  if [[ "${DUET_KEEP_INSTALL:-0}" == 1 ]]; then
    echo "install_test: kept $work"
  else
    rm -rf "$work"
  fi
  if [[ $rc -ne 0 ]]; then echo "install_test: FAILED (exit $rc)" >&2; fi
}
trap cleanup EXIT

run() {
  echo "+ $*"
  "$@"
}
step() { echo; echo "== $*"; }

step "build duet (host preset)"
if [[ "${DUET_SKIP_BUILD:-0}" != 1 ]]; then
  run cmake --preset host
  run cmake --build --preset host
fi

step "install into $prefix"
run cmake --install build-host --prefix "$prefix"
libdir=$prefix/lib
[[ -d $libdir ]] || libdir=$(dirname "$(find "$prefix" -name 'libduet.so' -print -quit)")
for f in "$libdir/libduet.so" "$libdir/cmake/duet/duetConfig.cmake" "$libdir/cmake/duet/duetConfigVersion.cmake" \
         "$prefix/include/duet/duet.h" "$prefix/include/duet/softmax.hpp" "$prefix/include/duet/config.hpp"; do
  [[ -e $f ]] || { echo "install_test: missing after install: $f" >&2; exit 1; }
done
echo "installed: $(cd "$prefix" && find . -type f | sort | tr '\n' ' ')"

# Every header the installed headers include must come from the install (or
# the system): compile each one alone against the prefix only.
step "each installed C++ header compiles on its own"
for h in "$prefix"/include/duet/*.hpp; do
  rel=${h#"$prefix/include/"}
  echo "#include <$rel>" | "${CXX:-c++}" -std=c++20 -fsyntax-only -x c++ -I"$prefix/include" - \
    || { echo "install_test: $rel does not compile against the installed headers" >&2; exit 1; }
done
echo "#include <duet/duet.h>" | "${CC:-cc}" -std=c11 -pedantic -Werror -fsyntax-only -x c -I"$prefix/include" - \
  || { echo "install_test: duet/duet.h is not C11" >&2; exit 1; }
echo "ok: $(ls "$prefix"/include/duet | tr '\n' ' ')"

step "configure and build examples/consumer against the installed package"
run cmake -S examples/consumer -B "$consumer_build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF
found=$(sed -n 's/^duet_DIR:PATH=//p' "$consumer_build/CMakeCache.txt")
echo "duet_DIR = $found"
[[ $found == "$prefix"/* ]] || { echo "install_test: the consumer found duet outside $prefix" >&2; exit 1; }
run cmake --build "$consumer_build"

# No LD_LIBRARY_PATH: the consumers find the installed libduet by their RPATH.
step "run the consumers"
for exe in duet_consumer duet_c_consumer; do
  resolved=$(env -u LD_LIBRARY_PATH ldd "$consumer_build/$exe" | awk '/libduet\.so/ {print $3}')
  echo "$exe: libduet -> $resolved"
  [[ $resolved == "$prefix"/* ]] || { echo "install_test: $exe does not load the installed libduet" >&2; exit 1; }
  run env -u LD_LIBRARY_PATH "$consumer_build/$exe"
done

if [[ -x "$prefix/bin/deviceinfo" ]]; then
  step "run the installed deviceinfo"
  echo "+ $prefix/bin/deviceinfo --help"
  env -u LD_LIBRARY_PATH "$prefix/bin/deviceinfo" --help >/dev/null
  echo "+ $prefix/bin/deviceinfo"
  info=$(env -u LD_LIBRARY_PATH "$prefix/bin/deviceinfo")
  printf '%s\n' "$info" | sed -n '1,3p'
  [[ $info == *"host:0"* ]] || { echo "install_test: deviceinfo does not list host:0" >&2; exit 1; }
fi

py=${PYTHON:-python3}
if command -v "$py" >/dev/null; then
  step "Python binding on the installed libduet"
  echo "+ DUET_LIBRARY=$libdir/libduet.so PYTHONPATH=python $py -c ..."
  DUET_LIBRARY=$libdir/libduet.so PYTHONPATH=$root/python "$py" - <<'EOF'
import ctypes
import duet

lib = duet.library()
print(f"duet {duet.version()} from {lib._name}, devices {duet.devices()}")
assert "host:0" in duet.devices()
# The C ABI directly (torch is not needed for this): a host softmax and a refused call.
x = (ctypes.c_float * 6)(0, 0, 0, 1, 2, 3)
y = (ctypes.c_float * 6)()
host = duet._lib.Device(duet._lib.BACKEND_HOST, 0)
duet._lib.check(lib.duet_softmax(host, duet._lib.F32, 2, 3, x, 3, y, 3, None))
assert abs(sum(y[:3]) - 1) < 1e-6 and abs(sum(y[3:]) - 1) < 1e-6, list(y)
try:
    duet._lib.check(lib.duet_softmax(host, duet._lib.F32, 2, 3, None, 3, y, 3, None))
    raise SystemExit("a null input was accepted")
except duet.DuetError as e:
    assert e.status == 1, e
    print(f"host softmax ok; a null input raises DuetError: {e}")
try:
    import torch  # noqa: F401
except ImportError:
    print("torch not importable: python/tests/test_duet_torch.py not run")
EOF
  # With torch and pytest, the binding's tests too: the CPU ones run on the
  # host backend; the GPU ones skip (this libduet is a host-only build).
  if "$py" -c "import torch, pytest" 2>/dev/null; then
    run env -u DUET_REQUIRE_GPU DUET_LIBRARY="$libdir/libduet.so" PYTHONPATH="$root/python" \
      "$py" -m pytest -q -p no:cacheprovider python/tests
  fi
fi

echo
echo "install_test: PASSED (duet installed to a temporary prefix; C++ and C consumers built with find_package and ran)"
