#!/usr/bin/env bash
# What a shared libduet exports and needs, checked against what it should:
#  * every defined dynamic symbol is the C ABI (duet_*) or the C++ API
#    (duet::..., with the typeinfo and vtables of its classes), never
#    duet::detail or duet::log, spdlog, fmt, nlohmann, a vendor runtime or a
#    std template instance;
#  * the API is there (so an empty table cannot pass);
#  * neither libspdlog nor libfmt is needed at run time.
# Usage: check_exports.sh path/to/libduet.so
# The lists go to grep as here-strings: under pipefail, `printf | grep -q`
# fails when grep exits at its match before printf has written the rest
# (SIGPIPE), which turns a present symbol into a missing one.
set -euo pipefail
lib=${1:?usage: check_exports.sh libduet.so}

symbols=$(nm -D --defined-only --demangle "$lib" | awk '{ $1 = ""; $2 = ""; sub(/^  /, ""); print }' | sort -u)
allowed='^(duet_[a-z0-9_]+|duet::.*|(typeinfo|typeinfo name|vtable) for duet::.*)$'
forbidden='^(duet::(detail|log)::|(typeinfo|typeinfo name|vtable) for duet::(detail|log)::)'
bad=$(printf '%s\n' "$symbols" | grep -Ev "$allowed" || true)
bad+=$(printf '%s\n' "$symbols" | grep -E "$forbidden" || true)
count=$(printf '%s\n' "$symbols" | grep -c . || true)

failed=0
if [[ -n $bad ]]; then
  echo "check_exports: $lib exports $(printf '%s\n' "$bad" | grep -c .) symbols outside its API:" >&2
  sed -n 's/^/  /; p; 40q' <<<"$bad" >&2
  failed=1
fi
for want in 'duet_softmax' 'duet_last_error' 'duet_version' 'duet::softmax(' 'duet::Device::props() const' \
            'typeinfo for duet::Error' 'duet::plan_softmax(' 'duet::reference::compare(' 'duet_copy_kernel' \
            'duet::copy_kernel('; do
  if ! grep -qF -- "$want" <<<"$symbols"; then
    echo "check_exports: $lib does not export $want" >&2
    failed=1
  fi
done
needed=$(ldd "$lib")
if grep -Eq 'lib(spdlog|fmt)\.so' <<<"$needed"; then
  echo "check_exports: $lib needs spdlog or fmt at run time:" >&2
  printf '%s\n' "$needed" | grep -E 'lib(spdlog|fmt)\.so' | sed 's/^/  /' >&2
  failed=1
fi
if [[ $failed -eq 0 ]]; then
  echo "check_exports: $lib exports $count symbols, all API; needs $(printf '%s\n' "$needed" | awk '{print $1}' | grep -c .) libraries, neither spdlog nor fmt"
fi
exit $failed
