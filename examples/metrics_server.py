"""Serve a running dataflow's operator metrics to Prometheus, then scrape them once.

    python examples/metrics_server.py            # needs pip install -e '.[metrics]'

Worker 0 of two starts ``timelypy.metrics.serve`` on a port the system
chooses, both workers push 1,000 numbers through flat_map -> filter ->
exchange, and while the dataflow still runs worker 0 reads
``http://127.0.0.1:PORT/metrics`` the way Prometheus would and prints the
``timelypy_operator_records_*`` lines of worker 0, for instance (one line)::

    timelypy_operator_records_in_total{address="0.2",dataflow="0",
                                       operator="FlatMap",worker="0"} 500.0
"""

import urllib.request

import timelypy
import timelypy.metrics


def program(worker: timelypy.Worker) -> None:
    server = timelypy.metrics.serve(worker, port=0)
    handle, probe = timelypy.InputHandle(), timelypy.ProbeHandle()
    worker.dataflow(
        lambda scope: (
            scope.input_from(handle)
            .flat_map(lambda x: [x, -x])
            .filter(lambda x: x > 0)
            .exchange(lambda x: x)
            .probe_with(probe)
        )
    )
    handle.send_batch(list(range(worker.index, 1000, worker.peers)))
    handle.advance_to(1)
    worker.step_while(lambda: probe.less_than(1))
    if worker.index == 0:
        with urllib.request.urlopen(f"http://127.0.0.1:{server.port}/metrics") as reply:
            for line in reply.read().decode().splitlines():
                if line.startswith("timelypy_operator_records") and 'worker="0"' in line:
                    print(line)
    handle.close()


if __name__ == "__main__":
    timelypy.execute(timelypy.Config.process(2), program)
