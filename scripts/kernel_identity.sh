#!/usr/bin/env bash
# Checks that two revisions compile the GPU kernels to the same machine code.
#
#   scripts/kernel_identity.sh BASE [NEW]
# BASE and NEW are git revisions or directories holding a source tree
# ("." is the checkout as it is); NEW defaults to HEAD.
#
# Each revision's SOURCE (default kernels/softmax_launch.cu; the fused
# kernels: SOURCE=kernels/fused_launch.cu) is compiled for one NVIDIA target
# (ARCH, default 90) with the flags of cmake/DuetResourceReports.cmake, whose
# ptxas -v report the runtime embeds. Printed per kernel (mangled name):
#   - a ptxas report that differs (registers, barriers, shared memory,
#     constant bank, stack frame, spill stores and loads);
#   - a kernel whose SASS differs (cuobjdump -sass, where installed), else
#     one whose PTX differs; register numbers and label names are renamed in
#     order of first use first, so only a change of instructions or of data
#     flow shows.
# Kernels present in one revision only are listed too. Exits 0 when
# everything matches, 1 when something differs, 2 on a build failure.
# RENAME_NEW='PATTERN=>REPLACEMENT' (a Python regex) renames NEW's kernels
# before they are compared, for a change that adds a template parameter:
#   RENAME_NEW='ELb0EEEvNS_11SoftmaxArgsE=>EEEvNS_11SoftmaxArgsE'
# compares each kernel instantiated with a new trailing `false` against the
# base kernel without it.
# Work files stay under WORK (default: a temporary directory, printed); a
# revision already compiled there is not compiled again.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -lt 1 ] || [ $# -gt 2 ]; then
  echo "usage: $0 BASE [NEW]   (git revisions or source directories; '.' is the working tree)" >&2
  exit 2
fi
base_rev=$1
new_rev=${2:-HEAD}
arch=${ARCH:-90}
source=${SOURCE:-kernels/softmax_launch.cu}
nvcc=${NVCC:-nvcc}
cxx=${CXX:-g++}
python=${PYTHON:-python3}
work=${WORK:-$(mktemp -d /tmp/duet_kernel_identity.XXXXXX)}
mkdir -p "$work"
echo "work files: $work"

# Exports a revision's tree (or links a directory) to $work/$2/src.
export_tree() {
  local rev=$1 dest=$work/$2
  rm -rf "$dest"
  mkdir -p "$dest"
  if [ -d "$rev" ]; then
    ln -s "$(cd "$rev" && pwd)" "$dest/src"
  else
    mkdir -p "$dest/src"
    git archive "$rev" | tar -x -C "$dest/src"
  fi
}

# Compiles one tree: the ptxas report, the PTX and (with cuobjdump) the SASS.
compile() {
  local dir=$work/$1 src=$work/$1/src
  local incs=(-I"$src/backends" -I"$src/backends/vendor" -I"$src/backends/gpu" -I"$src/kernels"
              -I"$src/runtime/include" -I"$dir/include")
  # Headers CMake generates (duet/export.h): the export macro does not reach
  # device code, so any version numbers do.
  if [ -f "$src/runtime/include/duet/export.h.in" ]; then
    mkdir -p "$dir/include/duet"
    sed -e 's/@PROJECT_VERSION_[A-Z]*@/0/' -e 's/@DUET_STATIC_LIBRARY@/1/' \
      "$src/runtime/include/duet/export.h.in" >"$dir/include/duet/export.h"
  fi
  # With the experiments (split_row), so every catalogued kernel compares.
  local flags=(-std=c++17 -O3 -ccbin "$cxx" -DDUET_VENDOR_CUDA -DDUET_NS=cuda -DDUET_EXPERIMENTS=1 "${incs[@]}"
               -arch=sm_"$arch")
  mkdir -p "$dir/keep"
  if ! "$nvcc" "${flags[@]}" -cubin -Xptxas -v --keep --keep-dir "$dir/keep" "$src/$source" \
       -o "$dir/kernels.cubin" 2>"$dir/ptxas.log"; then
    cat "$dir/ptxas.log" >&2
    echo "$1: build failed" >&2
    exit 2
  fi
  cp "$(ls "$dir"/keep/*.ptx | head -1)" "$dir/kernels.ptx"
  if command -v cuobjdump >/dev/null; then cuobjdump -sass "$dir/kernels.cubin" >"$dir/kernels.sass"; fi
}

# A revision already compiled under the same WORK (same commit, ARCH, nvcc)
# is reused; a directory is always compiled again.
build() {
  local rev=$1 side=$2 id
  local tree=.
  [ -d "$rev" ] || tree=$(git rev-parse "$rev^{tree}")
  id="$tree sm_$arch $("$nvcc" --version | tail -1)"
  if [ "$tree" != "." ] && [ -f "$work/$side/id" ] && [ "$(cat "$work/$side/id")" = "$id" ]; then
    echo "reusing the build of $rev for sm_$arch"
    return
  fi
  if [ "$side" = new ] && [ "$tree" != "." ] && [ "$(cat "$work/base/id")" = "$id" ]; then
    rm -rf "$work/new" && cp -r "$work/base" "$work/new"
    return
  fi
  export_tree "$rev" "$side"
  echo "compiling $rev for sm_$arch"
  compile "$side"
  echo "$id" >"$work/$side/id"
}
build "$base_rev" base
build "$new_rev" new

"$python" - "$work" <<'EOF'
import re, sys
work = sys.argv[1]

def reports(path):
    """Mangled kernel name -> its ptxas -v lines, reduced to the numbers."""
    out, name = {}, None
    for line in open(path):
        m = re.search(r"Compiling entry function '([^']+)'", line)
        if m:
            name = m.group(1)
            out[name] = []
        elif name and re.search(r"Used \d+ registers|stack frame", line):
            out[name].append(re.sub(r"^.*?:\s*", "", line.strip()))
    return out

def canonical(lines):
    """Registers and labels renamed in order of first use."""
    names = {}
    def rename(m):
        tok = m.group(0)
        if tok not in names:
            kind = re.match(r"%[a-z]+|\$L__[A-Za-z]+|\$L", tok).group(0)
            names[tok] = "%s#%d" % (kind, sum(1 for k in names if k.startswith(kind)))
        return names[tok]
    pat = re.compile(r"%(?:rd|rs|r|fd|f|p|h|hh)\d+\b|\$L__[A-Za-z]+\d+(?:_\d+)*")
    return [pat.sub(rename, l) for l in lines]

def ptx_kernels(path):
    out, name, body = {}, None, []
    for line in open(path):
        m = re.match(r"\.(?:visible|weak)?\s*\.entry\s+(\S+)\(", line) or re.match(r"\.entry\s+(\S+)\(", line)
        if m:
            name, body = m.group(1), []
        if name:
            s = line.strip()
            if s and not s.startswith("//") and not s.startswith(".loc") and not s.startswith(".file"):
                body.append(s)
            if line.startswith("}"):
                out[name] = canonical(body)
                name = None
    return out

def sass_kernels(path):
    out, name = {}, None
    for line in open(path):
        m = re.match(r"\s*Function : (\S+)", line)
        if m:
            name = m.group(1)
            out[name] = []
            continue
        if name and "/*" in line:
            s = re.sub(r"/\*[0-9a-f]{4,}\*/", "", line)       # address
            s = re.sub(r"/\* 0x[0-9a-f]+ \*/", "", s)           # encoding
            s = s.strip()
            if s and s != ";":
                out[name].append(s)
    return out

import os
rename = os.environ.get("RENAME_NEW", "")
def renamed(kernels):
    """NEW's kernels under RENAME_NEW's names (in their bodies too: PTX names its parameters after the kernel)."""
    if not rename:
        return kernels
    pattern, replacement = rename.split("=>", 1)
    return {re.sub(pattern, replacement, k): [re.sub(pattern, replacement, l) for l in v] for k, v in kernels.items()}

def compare(what, a, b, show):
    b = renamed(b)
    diffs = 0
    for k in sorted(set(a) | set(b)):
        if k not in a or k not in b:
            print("%s: %s only in %s" % (what, k, "base" if k in a else "new"))
            diffs += 1
        elif a[k] != b[k]:
            diffs += 1
            print("%s differs: %s" % (what, k))
            if show:
                print("   base: " + " | ".join(a[k]))
                print("   new:  " + " | ".join(b[k]))
            else:
                la, lb = a[k], b[k]
                first = next((i for i in range(min(len(la), len(lb))) if la[i] != lb[i]), min(len(la), len(lb)))
                print("   %d vs %d lines; first difference at line %d:" % (len(la), len(lb), first))
                print("   base: " + (la[first] if first < len(la) else "<end>"))
                print("   new:  " + (lb[first] if first < len(lb) else "<end>"))
    print("%s: %d kernels compared, %d differ" % (what, len(set(a) | set(b)), diffs))
    return diffs

d = compare("ptxas report", reports(work + "/base/ptxas.log"), reports(work + "/new/ptxas.log"), True)
if os.path.exists(work + "/base/kernels.sass"):
    d += compare("SASS", sass_kernels(work + "/base/kernels.sass"), sass_kernels(work + "/new/kernels.sass"), False)
else:
    print("cuobjdump not found: comparing PTX")
    d += compare("PTX", ptx_kernels(work + "/base/kernels.ptx"), ptx_kernels(work + "/new/kernels.ptx"), False)
sys.exit(1 if d else 0)
EOF
