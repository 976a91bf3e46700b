# harness.sh — sourced by the shell tests: a scratch directory $W removed
# at exit, ok/bad lines with their counts, and the closing line
# "NAME: N passed, N failed" (finish NAME), whose status is the test's.
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
pass=0 fail=0
ok() { echo "ok   $1"; pass=$((pass + 1)); }
bad() { echo "FAIL $1"; fail=$((fail + 1)); }
finish() { echo "$1: $pass passed, $fail failed"; [ "$fail" -eq 0 ]; }
