"""Regression check: ``ClusterNetwork.close`` must not hang when a peer disconnects meanwhile.

    python close_race.py

Builds the networks of a two-process cluster in this one process, lets them
shake hands, then closes process 0's network while process 1 goes away in
the middle of it: just before process 0 disables its first socket monitor,
process 1's network is closed and this waits (bounded) until process 0's
connection to it is gone.  Prints ``closed`` and exits 0 once ``close``
returns; when it hangs it hangs holding the GIL, so only the caller's
timeout can stop it.

``close`` closes the monitors' reading sockets before it disables the
monitors.  A peer's disconnection in between makes libzmq's I/O thread send
the event to a monitor socket nobody reads any more -- a blocking send, made
while holding the socket's monitor lock -- and ``disable_monitor`` then waits
for that lock forever (the process never exits; seen in about one launcher run
in a hundred on a loaded machine).  Here the window is held open on purpose.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import Any

import zmq

from timelypy import Config
from timelypy.communication.network import ClusterNetwork
from timelypy.launch import free_ports

#: How long to wait for process 0 to notice process 1's disconnection.
NOTICE_SECONDS = 1.5


def connections_to(port: int) -> int:
    """TCP connections to 127.0.0.1:``port`` whose local end is still open."""
    count = 0
    for line in open("/proc/net/tcp").read().splitlines()[1:]:
        fields = line.split()
        remote, state = fields[2], fields[3]
        # 01 ESTABLISHED, 08 CLOSE_WAIT: the peer may have gone, but our socket is open.
        if int(remote.split(":")[1], 16) == port and state in ("01", "08"):
            count += 1
    return count


def main() -> int:
    """Run the check; return the exit code."""
    ports = free_ports(2)
    addresses = [f"127.0.0.1:{port}" for port in ports]
    networks = [
        ClusterNetwork(Config.cluster(1, 2, index, addresses), b"secret", connect_timeout=10)
        for index in range(2)
    ]
    shakers = [threading.Thread(target=network.handshake) for network in networks]
    for thread in shakers:
        thread.start()
    for thread in shakers:
        thread.join(15)

    original = zmq.Socket.disable_monitor
    state = {"first": True}

    def disable_monitor(sock: Any) -> Any:
        if state["first"]:
            state["first"] = False
            networks[1].close()  # process 1 goes away while process 0 is closing
            deadline = time.monotonic() + NOTICE_SECONDS
            while connections_to(ports[1]) and time.monotonic() < deadline:
                time.sleep(0.01)
        return original(sock)

    zmq.Socket.disable_monitor = disable_monitor  # type: ignore[method-assign]
    networks[0].close()
    print("closed", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
