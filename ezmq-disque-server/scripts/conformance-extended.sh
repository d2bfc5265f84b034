#!/bin/sh
# Runs the full extended Disque conformance suite against the server binary:
# a standalone node with the append-only file (and a kill -9 restart
# command for the persistence tests) plus a three-node cluster, on free
# ports. Prints the suite's last line; exits with the suite's status.
#
# usage: scripts/conformance-extended.sh [BINARY] [SUITE]
#   BINARY  default: $CARGO_TARGET_DIR (or target)/release/ezmq-disque-server
#   SUITE   default: /work/shared/disque-conformance/conformance.py
set -eu
here=$(cd "$(dirname "$0")/../.." && pwd)
BIN=${1:-${CARGO_TARGET_DIR:-$here/target}/release/ezmq-disque-server}
SUITE=${2:-/work/shared/disque-conformance/conformance.py}
[ -x "$BIN" ] || { echo "no server binary at $BIN (cargo build --release -p ezmq-disque-server)" >&2; exit 2; }
DIR=$(mktemp -d)
cleanup() {
    [ -f "$DIR/pid" ] && kill -9 "$(cat "$DIR/pid")" 2>/dev/null || true
    [ -n "${CPID:-}" ] && kill "$CPID" 2>/dev/null || true
    rm -rf "$DIR"
}
trap cleanup EXIT INT TERM

# Waits until file $1 has $2 lines (the "ready" lines), up to 30 s.
wait_ready() {
    i=0
    while [ "$(cat "$1" 2>/dev/null | wc -l)" -lt "$2" ]; do
        i=$((i + 1))
        [ $i -gt 300 ] && { echo "server did not start" >&2; exit 2; }
        sleep 0.1
    done
}

# The standalone node: started once on a free port, then always on that port.
"$BIN" --port 0 --appendonly yes --dir "$DIR" --appendfsync always > "$DIR/first.out" 2> "$DIR/log" &
echo $! > "$DIR/pid"
wait_ready "$DIR/first.out" 1
ADDR=$(awk '{print $3}' "$DIR/first.out")
PORT=${ADDR##*:}
START="cd $DIR && ($BIN --port $PORT --appendonly yes --dir $DIR --appendfsync always >> $DIR/out 2>> $DIR/log & echo \$! > $DIR/pid)"
RESTART="kill -9 \$(cat $DIR/pid); while kill -0 \$(cat $DIR/pid) 2>/dev/null; do sleep 0.05; done; $START"

"$BIN" --cluster 3 --port 0 > "$DIR/cluster.out" 2>> "$DIR/log" &
CPID=$!
wait_ready "$DIR/cluster.out" 3
CLUSTER=$(awk '{print $3}' "$DIR/cluster.out" | paste -sd, -)

set +e
python3 "$SUITE" --addr "$ADDR" --cluster "$CLUSTER" --extended --restart-cmd "$RESTART" > "$DIR/result" 2>&1
rc=$?
set -e
[ $rc -eq 0 ] || grep '^FAIL' "$DIR/result" >&2
tail -n 1 "$DIR/result"
exit $rc
