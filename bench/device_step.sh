# Sourced by the device-call scripts (bench/*_run.sh): step NAME LOG LIMIT COMMAND... runs
# COMMAND under `timeout LIMIT`, appends its output to $out/LOG, and records its exit status
# and seconds in $out/summary.txt (and on standard output). Needs $out.
step() {
  local name=$1 log=$2 limit=$3
  shift 3
  local t0=$SECONDS
  echo "== $name: $*" >>"$out/$log"
  timeout "$limit" "$@" >>"$out/$log" 2>&1
  echo "== $name: exit $? in $((SECONDS - t0)) s" | tee -a "$out/summary.txt"
}
