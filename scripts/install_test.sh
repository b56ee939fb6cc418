#!/usr/bin/env bash
# Checks duet as a downstream user gets it: builds the host backend, installs
# it into a temporary prefix, and from there:
#   * the package config exports duet::runtime alone and (shared) needs
#     nothing a consumer does not: examples/consumer (a separate CMake
#     project: find_package(duet CONFIG REQUIRED), duet::runtime, a C++ and a
#     C11 program) configures with CMake's search limited to the prefix;
#   * both consumers build and run, and the C one again through pkg-config
#     (duet.pc);
#   * the installed deviceinfo and the Python binding run on the installed
#     libduet (shared);
#   * the uninstall target removes every installed file.
#
#   install_test.sh          libduet shared: the `host` preset (build-host/)
#   install_test.sh static   libduet static (BUILD_SHARED_LIBS=OFF) in
#                            build-static/, whose CPU tests run first
#
# Environment:
#   DUET_KEEP_INSTALL=1   keep the temporary prefix and consumer build (printed)
#   DUET_SKIP_BUILD=1     install the existing build folder without rebuilding
#   PYTHON                interpreter for the Python check (default python3; skipped if absent)
# Exit status: 0 when everything passed, non-zero at the first failure.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
kind=${1:-shared}
case "$kind" in
  shared) build=build-host ;;
  static) build=build-static ;;
  *) echo "usage: install_test.sh [shared|static]" >&2; exit 2 ;;
esac

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

if [[ $kind == shared ]]; then
  step "build duet (host preset)"
  if [[ "${DUET_SKIP_BUILD:-0}" != 1 ]]; then
    run cmake --preset host
    # What the install holds (the CPU tests run in the default and static builds).
    run cmake --build --preset host --target duet deviceinfo duet-bench
  fi
  libfile=libduet.so
else
  step "build and test duet as a static library (host backend, $build)"
  if [[ "${DUET_SKIP_BUILD:-0}" != 1 ]]; then
    run cmake --preset static
    run cmake --build --preset static
  fi
  run ctest --test-dir "$build" -L cpu --output-on-failure -j "$(nproc)"
  libfile=libduet.a
fi

step "install into $prefix"
run cmake --install "$build" --prefix "$prefix"
libdir=$(dirname "$(find "$prefix" -name "$libfile" -print -quit)")
for f in "$libdir/$libfile" "$libdir/cmake/duet/duetConfig.cmake" "$libdir/cmake/duet/duetConfigVersion.cmake" \
         "$libdir/pkgconfig/duet.pc" "$prefix/include/duet/duet.h" "$prefix/include/duet/softmax.hpp" \
         "$prefix/include/duet/config.hpp" "$prefix/include/duet/export.h"; do
  [[ -e $f ]] || { echo "install_test: missing after install: $f" >&2; exit 1; }
done
echo "installed: $(cd "$prefix" && find . -type f | sort | tr '\n' ' ')"

# The export set holds duet::runtime alone (no internal target), and the
# config of a shared libduet finds no dependency.
step "the installed package config"
exported=$(grep -ho 'add_library([^ ]*' "$libdir"/cmake/duet/duetTargets.cmake | sed 's/add_library(//' | sort -u | tr '\n' ' ')
echo "exported targets: $exported"
[[ $exported == "duet::runtime " ]] || { echo "install_test: the export set is not duet::runtime alone" >&2; exit 1; }
dependencies=$(grep -h 'find_dependency(' "$libdir"/cmake/duet/duetConfig.cmake || true)
echo "find_dependency: ${dependencies:-none}"
if [[ $kind == shared && -n $dependencies ]]; then
  echo "install_test: a shared libduet's package config should need nothing" >&2
  exit 1
fi

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

# A shared libduet's consumer finds packages in the prefix alone (not in
# /usr, where spdlog and nlohmann_json are); a static one's also finds the
# system libraries libduet's objects call into.
search_limits=(-DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF -DCMAKE_FIND_USE_SYSTEM_PACKAGE_REGISTRY=OFF)
if [[ $kind == shared ]]; then
  # The build tools named here, since the limited search would not find them.
  search_limits+=(-DCMAKE_FIND_USE_CMAKE_SYSTEM_PATH=OFF -DCMAKE_FIND_USE_SYSTEM_ENVIRONMENT_PATH=OFF
                  "-DCMAKE_MAKE_PROGRAM=$(command -v ninja)" "-DCMAKE_C_COMPILER=$(command -v "${CC:-cc}")"
                  "-DCMAKE_CXX_COMPILER=$(command -v "${CXX:-c++}")")
fi
step "configure and build examples/consumer against the installed package"
run cmake -S examples/consumer -B "$consumer_build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$prefix" "${search_limits[@]}"
found=$(sed -n 's/^duet_DIR:PATH=//p' "$consumer_build/CMakeCache.txt")
echo "duet_DIR = $found"
[[ $found == "$prefix"/* ]] || { echo "install_test: the consumer found duet outside $prefix" >&2; exit 1; }
run cmake --build "$consumer_build"

# The C consumer again, built with the compiler and pkg-config alone.
step "build examples/consumer/c_main.c with pkg-config"
export PKG_CONFIG_PATH=$libdir/pkgconfig
pc_flags=(--cflags --libs)
[[ $kind == static ]] && pc_flags+=(--static)
echo "pkg-config ${pc_flags[*]} duet: $(pkg-config "${pc_flags[@]}" duet)"
read -r -a pc_args <<<"$(pkg-config "${pc_flags[@]}" duet)"
run "${CC:-cc}" -std=c11 -Wall -Wextra -pedantic -Werror examples/consumer/c_main.c -o "$consumer_build/duet_c_consumer_pc" \
  "${pc_args[@]}" -Wl,-rpath,"$libdir" -lm

# No LD_LIBRARY_PATH: the consumers find the installed libduet by their RPATH.
step "run the consumers"
for exe in duet_consumer duet_c_consumer duet_c_consumer_pc; do
  resolved=$(env -u LD_LIBRARY_PATH ldd "$consumer_build/$exe" | awk '/libduet\.so/ {print $3}')
  if [[ $kind == shared ]]; then
    echo "$exe: libduet -> $resolved"
    [[ $resolved == "$prefix"/* ]] || { echo "install_test: $exe does not load the installed libduet" >&2; exit 1; }
  else
    [[ -z $resolved ]] || { echo "install_test: $exe loads a shared libduet ($resolved) from a static install" >&2; exit 1; }
  fi
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
if [[ $kind == shared ]] && command -v "$py" >/dev/null; then
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

step "uninstall"
run cmake --build "$build" --target uninstall >/dev/null
left=$(find "$prefix" -type f | sed "s|^$prefix/||")
if [[ -n $left ]]; then
  echo "install_test: files left after uninstall:" >&2
  printf '  %s\n' $left >&2
  exit 1
fi
echo "nothing left under $prefix"

echo
echo "install_test: PASSED ($kind libduet installed to a temporary prefix; C++ and C consumers built with find_package, the C one with pkg-config, and ran; uninstalled)"
