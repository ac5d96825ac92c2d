#!/bin/sh
# Every C source is formatted with the project's .clang-format (kernel style).
cd "$KVMM_SRC" || exit 1
command -v clang-format >/dev/null 2>&1 || { echo "clang-format not installed"; exit 77; }
files=$(git ls-files '*.c' '*.h' 2>/dev/null)
[ -n "$files" ] || { echo "not a git checkout"; exit 77; }
clang-format --dry-run --Werror $files
