#!/usr/bin/env bash
# Lines of code per resource type of the postgres and jetstream plugins:
# each type's own file, without blank lines, comment lines (//, ///, //!)
# and its #[cfg(test)] module (which sits at the end of a file). Helpers the
# types share (sql.rs, catalog.rs, lifecycle.rs, ...) are counted once, on
# their own line. The goal for a plugin author is under 150 per type.
#
#   scripts/plugin-loc.sh
set -euo pipefail
cd "$(dirname "$0")/.."

count() {
    awk '/^#\[cfg\(test\)\]/ { exit }
         /^[[:space:]]*$/ { next }
         /^[[:space:]]*\/\// { next }
         { n++ }
         END { print n + 0 }' "$1"
}

report() {
    local dir=$1
    shift
    local types=" $* "
    echo "$dir"
    local total=0 shared=0
    for type in "$@"; do
        n=$(count "$dir/src/$type.rs")
        total=$((total + n))
        printf '  %-24s %4d%s\n' "$type.rs" "$n" "$([ "$n" -ge 150 ] && echo '  (over 150)')"
    done
    for file in "$dir"/src/*.rs; do
        name=$(basename "$file" .rs)
        case "$types" in *" $name "*) continue ;; esac
        shared=$((shared + $(count "$file")))
    done
    printf '  %-24s %4d  (%d types, %d on average)\n' "types" "$total" "$#" "$((total / $#))"
    printf '  %-24s %4d\n' "shared files" "$shared"
}

report plugins/postgres role database schema grant default_privileges extension
report plugins/jetstream stream consumer kv kv_entry object
