#!/bin/sh
# Lists functions longer than a limit (default 80 lines, counted from the signature to the
# closing brace) in the given folders (default src/), longest first, one "lines file:line name"
# each. Uses Universal Ctags' end-of-scope field. Hot kernels may stay longer; each says why in a
# comment above it.
# Usage: scripts/long_functions.sh [limit] [folder...]
set -eu
limit=${1:-80}
[ $# -gt 0 ] && shift
[ $# -gt 0 ] || set -- src
ctags -R --languages=C++ --langmap=C++:+.h.inc --c++-kinds=f --fields=+ne -o - "$@" |
  awk -F'\t' -v limit="$limit" '{
    line = 0; end = 0
    for (i = 4; i <= NF; i++) {
      if ($i ~ /^line:/) line = substr($i, 6)
      if ($i ~ /^end:/) end = substr($i, 5)
    }
    if (end - line + 1 > limit) printf "%d %s:%d %s\n", end - line + 1, $2, line, $1
  }' | sort -rn
