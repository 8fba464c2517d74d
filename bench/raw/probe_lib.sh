# Sourced by the bench/raw multi-GPU scripts. probe NAME TIMEOUT COMMAND...: COMMAND's output,
# filtered, in $OUT/probe_NAME.log, its exit status and its tail.
probe() {
  local name=$1 limit=$2
  shift 2
  echo "== $name"
  timeout "$limit" "$@" 2>&1 | grep -v -e lazyInit -e Warning -e "warnings.warn" -e "return super" \
    -e "Variable._execution" > "$OUT/probe_$name.log"
  echo "exit ${PIPESTATUS[0]}"
  tail -c "${PROBE_TAIL_BYTES:-2500}" "$OUT/probe_$name.log"
}
