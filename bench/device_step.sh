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

# unpack_stage STAGE_TAR [PEER_TAR]: unpacks the staged binaries into a new folder, and the
# peer site folder (if given) into its peer/ subfolder; prints the folder.
unpack_stage() {
  local work
  work=$(mktemp -d)
  tar -C "$work" -xJf "$1"
  if [ -n "${2:-}" ]; then
    mkdir -p "$work/peer"
    tar -C "$work/peer" -xJf "$2"
  fi
  echo "$work"
}
