#!/bin/sh
# valgrind-redlockd.sh -- run bin/redlockd under valgrind memcheck for the integration
# suite (`make test-valgrind`): any error or definite leak makes the exit status 99.
here=$(cd "$(dirname "$0")/.." && pwd)
exec valgrind --quiet --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite \
  --show-leak-kinds=definite --num-callers=30 "$here/bin/redlockd" "$@"
