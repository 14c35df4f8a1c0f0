#!/bin/sh
# Builds the release `shoal` of another revision for `make bench-compare` and
# prints the binary's path (stdout carries only that; progress goes to stderr).
#
#   benches/build-base.sh [REV] [DIR]
#
# REV defaults to origin/main, else main; when that is HEAD's own commit, to
# HEAD~1 (after a merge, the previous main). DIR (default target/bench-base)
# holds a detached git worktree of REV (DIR/src), its own target dir
# (DIR/target, reused between runs; seeded once from target/release so the
# dependencies are not rebuilt) and one binary per commit (DIR/shoal-<commit>,
# reused as is; the three newest are kept).
set -eu

rev=${1:-}
dir=${2:-target/bench-base}

if [ -z "$rev" ]; then
    for r in origin/main main; do
        if git rev-parse -q --verify "$r^{commit}" >/dev/null; then
            rev=$r
            break
        fi
    done
    if [ -z "$rev" ] || [ "$(git rev-parse "$rev^{commit}")" = "$(git rev-parse HEAD)" ]; then
        rev=HEAD~1
    fi
fi
commit=$(git rev-parse --verify "$rev^{commit}")
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
out="$dir/shoal-$commit"
if [ -x "$out" ]; then
    echo "bench-compare: base $rev ($commit) already built" >&2
    echo "$out"
    exit 0
fi

echo "bench-compare: building base $rev ($commit) in $dir" >&2
if [ -e "$dir/src/.git" ]; then
    git -C "$dir/src" checkout -q --detach --force "$commit" >&2
    git -C "$dir/src" clean -q -fd >&2
else
    rm -rf "$dir/src"
    git worktree prune
    git worktree add -q --detach "$dir/src" "$commit" >&2
fi
if [ ! -e "$dir/target/.seeded" ] && [ -d target/release/deps ]; then
    # The dependencies' artifacts only (not shoal's, nor test and bench binaries).
    mkdir -p "$dir/target/release/deps"
    cp -a target/release/build target/release/.fingerprint "$dir/target/release/"
    find target/release/deps -maxdepth 1 -type f \( -name 'lib*' -o -name '*.d' \) \
        ! -name '*shoal*' -exec cp -a -t "$dir/target/release/deps/" {} +
    touch "$dir/target/.seeded"
fi
(cd "$dir/src" && CARGO_TARGET_DIR="$dir/target" ${CARGO:-cargo} build --release --locked --bin shoal >&2)
cp "$dir/target/release/shoal" "$out.tmp"
mv "$out.tmp" "$out"
# Keep the three newest binaries (about 150 MB each with debug info).
ls -t "$dir"/shoal-* | tail -n +4 | while read -r old; do rm -f "$old"; done
echo "$out"
