# harness.sh — sourced by the shell tests: a scratch directory $W removed
# at exit, ok/bad lines with their counts, and the closing line
# "NAME: N passed, N failed" (finish NAME), whose status is the test's.
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
pass=0 fail=0
ok() { echo "ok   $1"; pass=$((pass + 1)); }
bad() { echo "FAIL $1"; fail=$((fail + 1)); }
finish() { echo "$1: $pass passed, $fail failed"; [ "$fail" -eq 0 ]; }
# keep_manifest BUILD, for a test that installs from the build tree: its
# install_manifest.txt (a real make install's, which make uninstall reads)
# is put back at exit. The tests that call it share the ctest RESOURCE_LOCK
# install_manifest, so they never run at once.
keep_manifest() {
  MANIFEST=$1/install_manifest.txt
  if [ -f "$MANIFEST" ]; then cp -p "$MANIFEST" "$W/manifest.saved"; fi
  trap 'if [ -f "$W/manifest.saved" ]; then cp -p "$W/manifest.saved" "$MANIFEST"; else rm -f "$MANIFEST"; fi; rm -rf "$W"' EXIT
}
