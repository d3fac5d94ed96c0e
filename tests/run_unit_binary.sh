#!/bin/sh
# Runs one unit test binary (tests/CMakeLists.txt, superserve_test). A binary
# the build did not make fails the test, unless SUPERSERVE_SKIP_UNBUILT=1,
# where it is skipped (exit 77): scripts/run-tests' TSan stage builds only the
# threaded targets.
if [ ! -x "$1" ]; then
  if [ "${SUPERSERVE_SKIP_UNBUILT:-0}" = 1 ]; then
    echo "not built here: $1"
    exit 77
  fi
  echo "run_unit_binary.sh: $1 was not built" >&2
  exit 1
fi
exec "$@"
