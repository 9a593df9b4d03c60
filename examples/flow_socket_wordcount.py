"""A wordcount over lines that keep arriving on sockets, with results epoch by epoch.

    python examples/flow_socket_wordcount.py

Two line servers stand in for live feeds (a log shipper, ``nc -lk 9999``):
each listens on 127.0.0.1 and sends a line every 0.1 s for about 1.5 s,
then closes its connection.  :class:`~timelypy.flow.SocketInput` reads
both, a partition per server, and closes an epoch every 0.5 s of clock
time; ``reduce_epoch`` counts the words of each epoch.  The counts are
printed as each epoch closes, while the servers are still sending::

    epoch 0: error 4, ok 6
    epoch 1: error 3, ok 7
    epoch 2: error 2, ok 8
    total: error 9, ok 21

How many lines fall into which epoch depends on timing; the total does
not.  The flow ends when both servers have closed their connections.  On
Spark, ``timelypy_spark.iter_flow(spark, flow, workers=2)`` runs the same
flow with each server read by one Spark task.
"""

from __future__ import annotations

import socket
import threading
import time
from collections import Counter, defaultdict
from operator import add

from timelypy.flow import Dataflow, SocketInput, run

LINES_PER_SERVER = 15


def serve(server: socket.socket, lines: list[str]) -> None:
    """Send ``lines`` to the first client, one every 0.1 s, then close."""
    connection, _ = server.accept()
    with connection:
        for line in lines:
            connection.sendall(f"{line}\n".encode())
            time.sleep(0.1)


def main() -> None:
    feeds = [
        ["ok" if n % 3 else "error" for n in range(LINES_PER_SERVER)],
        ["ok" if n % 4 else "error" for n in range(LINES_PER_SERVER)],
    ]
    servers = [socket.create_server(("127.0.0.1", 0)) for _ in feeds]
    threads = [
        threading.Thread(target=serve, args=(server, lines), daemon=True)
        for server, lines in zip(servers, feeds, strict=True)
    ]
    for thread in threads:
        thread.start()

    flow = Dataflow()
    addresses = [f"127.0.0.1:{server.getsockname()[1]}" for server in servers]
    flow.input("feeds", SocketInput(addresses, epoch_length=0.5))
    flow.flat_map(str.split)
    flow.map(lambda word: (word, 1))
    flow.reduce_epoch(add)
    flow.capture()

    per_epoch: dict[int, Counter[str]] = defaultdict(Counter)
    last = None
    for epoch, (word, count) in run(flow):  # items come as their epoch closes
        if last is not None and epoch != last:
            print(f"epoch {last}: {_show(per_epoch[last])}", flush=True)
        per_epoch[epoch][word] += count
        last = epoch
    if last is not None:
        print(f"epoch {last}: {_show(per_epoch[last])}")
    print(f"total: {_show(sum(per_epoch.values(), Counter()))}")
    for thread in threads:
        thread.join()
    for server in servers:
        server.close()


def _show(counts: Counter[str]) -> str:
    return ", ".join(f"{word} {n}" for word, n in sorted(counts.items()))


if __name__ == "__main__":
    main()
