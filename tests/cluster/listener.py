#!/usr/bin/env python3
"""A TCP listener that is not an sshd, for the test cluster's broken nodes.

silent: accepts connections and never sends a byte, like a hung sshd or a filtering middlebox (ssh times out
        during the banner exchange).
close:  accepts and closes at once, like an sshd refusing a client under MaxStartups or TCP wrappers.

Runs until killed; the harness stops it by PID. It ends by itself after 30 minutes (longer than any test using it) so
that nothing lingers if the harness itself is killed.
"""
import socket
import sys
import time


def main() -> int:
    if len(sys.argv) != 4 or sys.argv[1] not in ("silent", "close"):
        print("usage: listener.py silent|close ADDRESS PORT", file=sys.stderr)
        return 2
    mode, address, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
    if not address.startswith("127."):
        print("listener.py: only loopback addresses (127.0.0.0/8)", file=sys.stderr)
        return 2
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind((address, port))
    server.listen(128)
    held = []
    started = time.monotonic()
    server.settimeout(1.0)
    while time.monotonic() - started < 1800:
        try:
            conn, _ = server.accept()
        except socket.timeout:
            continue
        if mode == "close":
            conn.close()
        else:
            held.append(conn)
    return 0


if __name__ == "__main__":
    sys.exit(main())
