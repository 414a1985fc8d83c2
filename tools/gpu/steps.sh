# The step runner of the GPU scripts (tools/gpu/session.sh and tools/gpu/stable_abi.sh source it).
#   step NAME [SECONDS] COMMAND...
# runs COMMAND when $STEPS names NAME or its group (the name up to its first '-'): its output goes to
# $OUT/NAME.log, its outcome to a line of $OUT/steps.tsv (name, exit status, seconds: what tools/gpu/record.py
# reads), and the log's last $TAIL lines are printed. SECONDS limits a command (not a shell function: timeout
# cannot run one). A failed step sets status=1 and the script goes on to the next.
status=0
: >"$OUT/steps.tsv"
step() {
  local name=$1 limit=()
  shift
  if [[ $1 =~ ^[0-9]+$ ]]; then
    limit=(timeout "$1")
    shift
  fi
  [[ " $STEPS " == *" $name "* || " $STEPS " == *" ${name%%-*} "* ]] || return 0
  local start=$SECONDS
  "${limit[@]}" "$@" >"$OUT/$name.log" 2>&1
  local rc=$?
  echo "== $name: rc=$rc ($((SECONDS - start)) s)"
  printf '%s\t%s\t%s\n' "$name" "$rc" "$((SECONDS - start))" >>"$OUT/steps.tsv"
  tail -n "${TAIL:-6}" "$OUT/$name.log"
  [ $rc -eq 0 ] || status=1
  return $rc
}
