#!/usr/bin/env python3
"""RSS per queued job: starts a server, ADDJOBs N small jobs to one queue
(pipelined, 10,000 per batch), and prints the growth of VmRSS per job.

usage: rss_per_job.py PORT N BODY_BYTES -- SERVER_COMMAND...
  e.g. rss_per_job.py 17811 1000000 12 -- target/release/ezmq-disque-server --port 17811
       rss_per_job.py 17812 1000000 12 -- /path/to/disque-server --port 17812 --appendonly no

The server is started with the given command (loopback port PORT), killed
at the end. VmRSS is read from /proc/PID/status after a PING (before) and
after the last ADDJOB reply (after). Prints one line:
  jobs=N rss_before_kib=.. rss_after_kib=.. bytes_per_job=..
"""
import socket
import subprocess
import sys
import time

BATCH = 10_000


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def connect(port, deadline):
    while True:
        try:
            return socket.create_connection(("127.0.0.1", port), timeout=30)
        except OSError:
            if time.time() > deadline:
                raise
            time.sleep(0.05)


def main():
    port, n, body_len = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    cmd = sys.argv[sys.argv.index("--") + 1:]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        s = connect(port, time.time() + 30)
        s.sendall(b"PING\r\n")
        rest = b""
        while b"\r\n" not in rest:
            rest += s.recv(1024)
        rest = rest.split(b"\r\n", 1)[1]
        time.sleep(0.2)
        before = rss_kib(proc.pid)
        body = b"x" * body_len
        one = b"*4\r\n$6\r\nADDJOB\r\n$5\r\nqueue\r\n$%d\r\n%s\r\n$1\r\n0\r\n" % (len(body), body)
        sent = 0
        while sent < n:
            k = min(BATCH, n - sent)
            s.sendall(one * k)
            # Read exactly k reply lines (each ends in CRLF).
            need = k
            buf = rest
            while need > 0:
                c = buf.count(b"\r\n")
                if c >= need:
                    if b"\r\n-" in b"\r\n" + buf:
                        raise RuntimeError("error reply: %r" % buf[:200])
                    parts = buf.split(b"\r\n", need)
                    buf = parts[need] if len(parts) > need else b""
                    need = 0
                    break
                chunk = s.recv(1 << 20)
                if not chunk:
                    raise RuntimeError("connection closed")
                buf += chunk
            rest = buf
            sent += k
        time.sleep(0.2)
        after = rss_kib(proc.pid)
        print("jobs=%d rss_before_kib=%d rss_after_kib=%d bytes_per_job=%.1f"
              % (n, before, after, (after - before) * 1024.0 / n))
    finally:
        proc.kill()
        proc.wait()


if __name__ == "__main__":
    main()
