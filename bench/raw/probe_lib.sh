# Sourced by bench/raw scripts of the GPU machine. probe NAME TIMEOUT COMMAND...: COMMAND's output,
# filtered, in $OUT/probe_NAME.log, its exit status and its tail. $OUT defaults to /tmp/ugraph_out.
OUT=${OUT:-/tmp/ugraph_out}
mkdir -p "$OUT"
probe() {
  local name=$1 limit=$2
  shift 2
  echo "== $name"
  timeout "$limit" "$@" 2>&1 | grep -v -e lazyInit -e Warning -e "warnings.warn" -e "return super" \
    -e "Variable._execution" > "$OUT/probe_$name.log"
  echo "exit ${PIPESTATUS[0]}"
  tail -c "${PROBE_TAIL_BYTES:-2500}" "$OUT/probe_$name.log"
}

# build_with_dgl: the package built as gpu_check.sh builds it (log in $OUT/build.log, its last
# lines shown) and CUDA DGL 2.4 unpacked to /tmp/dglpkg; quiet filters DGL's warnings.
build_with_dgl() {
  OUT=$OUT bash scripts/gpu_check.sh build > "$OUT/build.log" 2>&1
  tail -2 "$OUT/build.log"
  mkdir -p /tmp/dglpkg && tar -xJf .gpu-deps/dgl-2.4.0-cuda13-sm90-torch2.11.tar.xz -C /tmp/dglpkg
}
quiet() { grep -v -e lazyInit -e Warning -e "warnings.warn" -e "return super" -e _warn_once; }
