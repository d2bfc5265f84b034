#!/bin/sh
# Side-by-side throughput of this server and real Disque with redis-benchmark
# (50 clients, 12-byte bodies): unpipelined ADDJOB, 16-deep pipelined ADDJOB,
# unpipelined GETJOB NOHANG (from the jobs the two ADDJOB runs queued).
# ROUNDS rounds, alternating which server goes first; each server is started
# fresh per round on a loopback port and killed after it. Prints one line per
# run and the median per workload and server: requests per second and the
# server's CPU time per request in microseconds (utime + stime from
# /proc/PID/stat around the run; less sensitive to other load on the machine
# than requests per second).
#
# When redis-server is installed, each round also measures the load
# generator's ceiling: unpipelined PING (and PING -P 16) against a fresh
# redis-server, the cheapest request the fastest RESP server answers. No
# Disque-compatible server can beat that rate with this client on this
# machine, so ceiling / Disque is the largest ratio a run can show.
#
# usage: scripts/bench_vs_disque.sh EZMQ_BINARY DISQUE_BINARY [ROUNDS] [N]
set -eu
EZMQ=$1
DISQUE=$2
ROUNDS=${3:-3}
N=${4:-200000}
PORT_E=17941
PORT_D=17942
PORT_R=17943
OUT=$(mktemp)
trap 'rm -f "$OUT"' EXIT

wait_port() {
    i=0
    until redis-cli -p "$1" PING >/dev/null 2>&1; do
        i=$((i + 1)); [ $i -gt 100 ] && { echo "server on $1 did not start" >&2; exit 2; }
        sleep 0.1
    done
}

cpu_ticks() { awk '{print $14 + $15}' "/proc/$PID/stat"; }

rps() { # port, args... -> "rps cpu_us_per_request"
    p=$1; shift
    t0=$(cpu_ticks)
    r=$(redis-benchmark -p "$p" -c 50 -n "$N" -q "$@" 2>/dev/null | tr '\r' '\n' | grep 'requests per second' | tail -n 1 | awk -F': ' '{print $2}' | awk '{print $1}')
    t1=$(cpu_ticks)
    echo "$r $(awk -v a="$t0" -v b="$t1" -v hz="$(getconf CLK_TCK)" -v n="$N" 'BEGIN {printf "%.2f", (b - a) * 1000000 / hz / n}')"
}

run() { # name port
    a=$(rps "$2" ADDJOB q 123456789012 0)
    p=$(rps "$2" -P 16 ADDJOB q 123456789012 0)
    g=$(rps "$2" GETJOB NOHANG FROM q)
    echo "$1 $a $p $g" | tee -a "$OUT"
}

ceiling() {
    command -v redis-server >/dev/null 2>&1 || return 0
    redis-server --port $PORT_R --save '' --appendonly no >/dev/null 2>&1 & PID=$!
    wait_port $PORT_R
    echo "ceiling $(rps $PORT_R PING) $(rps $PORT_R -P 16 PING) $(rps $PORT_R PING)" | tee -a "$OUT"
    stop
}

start_e() { "$EZMQ" --port $PORT_E >/dev/null 2>&1 & PID=$!; wait_port $PORT_E; }
start_d() { "$DISQUE" --port $PORT_D --appendonly no --daemonize no --logfile /dev/null >/dev/null 2>&1 & PID=$!; wait_port $PORT_D; }
stop() { kill "$PID"; wait "$PID" 2>/dev/null || true; }

echo "server addjob_p1 cpu_us addjob_p16 cpu_us getjob_nohang cpu_us"
r=1
while [ $r -le "$ROUNDS" ]; do
    if [ $((r % 2)) -eq 1 ]; then
        start_d; run disque $PORT_D; stop
        start_e; run ezmq $PORT_E; stop
    else
        start_e; run ezmq $PORT_E; stop
        start_d; run disque $PORT_D; stop
    fi
    ceiling
    r=$((r + 1))
done
echo "median:"
for s in disque ezmq ceiling; do
    grep -q "^$s " "$OUT" || continue
    printf '%s' "$s"
    for col in 2 3 4 5 6 7; do
        printf ' %s' "$(grep "^$s " "$OUT" | awk -v c=$col '{print $c}' | sort -n | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}')"
    done
    echo
done
