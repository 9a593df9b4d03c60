"""timelypy_spark beyond local[N]: separate executor JVMs, a standalone cluster, shipping.

Each test runs the driver in a subprocess, because a Python process can only
have one SparkContext (the suite's local[4] session).
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
import venv
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "tests" / "spark" / "scripts" / "spark_job.py"

pyspark = pytest.importorskip("pyspark")


def corpus(directory: Path) -> tuple[list[str], Counter[str]]:
    words = ["apple", "banana", "cherry", "date", "elder", "fig", "grape"]
    paths, expected = [], Counter()
    for part in range(2):
        lines = [
            " ".join(words[(i * 3 + j + part) % 7] for j in range(i % 5 + 1)) for i in range(300)
        ]
        path = directory / f"part-{part}.txt"
        path.write_text("\n".join(lines) + "\n")
        expected.update(w for line in lines for w in line.split())
        paths.append(str(path))
    return paths, expected


def run_job(
    tmp_path: Path,
    master: str,
    *extra: str,
    env: dict[str, str] | None = None,
    workers: int = 2,
    timeout: float = 600,
    submit: bool = False,
) -> dict:
    """Run spark_job.py on ``master``: with ``submit``, through pyspark's ``spark-submit``."""
    paths, expected = corpus(tmp_path)
    output = tmp_path / "result.json"
    environment = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1", **(env or {}))
    if submit:
        home = Path(pyspark.__file__).parent
        environment.update(SPARK_HOME=str(home), PYSPARK_PYTHON=sys.executable)
        command = [str(home / "bin" / "spark-submit"), "--master", master, str(SCRIPT)]
    else:
        command = [sys.executable, str(SCRIPT), "--master", master]
    # Run from a directory without the package: Spark's Python workers start
    # in the driver's working directory and would import it from there.
    result = subprocess.run(
        [
            *command,
            "--workers",
            str(workers),
            *extra,
            str(output),
            *paths,
        ],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=environment,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    data = json.loads(output.read_text())
    assert data["counts"] == dict(expected)
    assert data["master"] == master  # spark-submit's --master, not a default of timelypy's
    return data


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_local_cluster_with_separate_executor_jvms(tmp_path):
    # Two executors (separate JVMs) with two cores each.
    data = run_job(
        tmp_path, "local-cluster[2,2,1024]", workers=4, env={"PYSPARK_PYTHON": sys.executable}
    )
    assert len({pid for _, pid in data["origins"]}) == 4


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_standalone_master_and_worker(tmp_path):
    home = Path(pyspark.__file__).parent
    env = dict(
        os.environ,
        SPARK_HOME=str(home),
        SPARK_LOCAL_IP="127.0.0.1",
        PYSPARK_PYTHON=sys.executable,
        SPARK_NO_DAEMONIZE="1",
    )
    master_port = free_port()
    spark_class = str(home / "bin" / "spark-class")
    logs = tmp_path / "logs"
    logs.mkdir()
    master = subprocess.Popen(
        [
            spark_class,
            "org.apache.spark.deploy.master.Master",
            "--host",
            "127.0.0.1",
            "--port",
            str(master_port),
            "--webui-port",
            str(free_port()),
        ],
        env=env,
        stdout=(logs / "master.log").open("w"),
        stderr=subprocess.STDOUT,
    )
    workers = [
        subprocess.Popen(
            [
                spark_class,
                "org.apache.spark.deploy.worker.Worker",
                f"spark://127.0.0.1:{master_port}",
                "--host",
                "127.0.0.1",
                "--port",
                str(free_port()),
                "--cores",
                "1",
                "--memory",
                "1g",
                "--webui-port",
                str(free_port()),
            ],
            env=env,
            stdout=(logs / f"worker-{index}.log").open("w"),
            stderr=subprocess.STDOUT,
        )
        for index in range(2)
    ]
    try:
        deadline = time.monotonic() + 90
        for index in range(2):
            log = logs / f"worker-{index}.log"
            while "Successfully registered with master" not in log.read_text():
                assert time.monotonic() < deadline, log.read_text()[-2000:]
                assert master.poll() is None and all(w.poll() is None for w in workers)
                time.sleep(0.5)
        # spark-submit --master: the job runs on that master, not on a default of timelypy's
        data = run_job(
            tmp_path,
            f"spark://127.0.0.1:{master_port}",
            env={"PYSPARK_PYTHON": sys.executable},
            submit=True,
        )
        assert len({pid for _, pid in data["origins"]}) == 2  # one executor per worker
    finally:
        for process in (*workers, master):
            process.terminate()
        for process in (*workers, master):
            try:
                process.wait(20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(10)


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_spark_submit_master_is_obeyed_on_a_local_cluster(tmp_path):
    data = run_job(
        tmp_path, "local-cluster[2,1,1024]", env={"PYSPARK_PYTHON": sys.executable}, submit=True
    )
    assert len({pid for _, pid in data["origins"]}) == 2


def bare_python(directory: Path) -> Path:
    """A Python with pyzmq, msgpack and cloudpickle but without timelypy."""
    env_dir = directory / "bare-venv"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    deps = directory / "deps"
    deps.mkdir()
    site = Path(__import__("zmq").__file__).resolve().parents[1]
    for name in ("zmq", "pyzmq.libs", "msgpack", "cloudpickle"):
        if (site / name).exists():
            (deps / name).symlink_to(site / name)
    site_packages = next((env_dir / "lib").glob("python3*/site-packages"))
    (site_packages / "deps.pth").write_text(str(deps) + "\n")
    python = env_dir / "bin" / "python"
    check = subprocess.run(
        [str(python), "-c", "import zmq, msgpack; import timelypy"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=directory,
    )
    assert "No module named 'timelypy'" in check.stderr, check.stderr
    return python


@pytest.mark.slow
def test_ship_package_to_executors_without_timelypy(tmp_path):
    python = bare_python(tmp_path)
    temp = tmp_path / "tmp"
    temp.mkdir()
    data = run_job(
        tmp_path, "local[2]", "--ship", env={"PYSPARK_PYTHON": str(python), "TMPDIR": str(temp)}
    )
    # The executors imported the shipped archive, not an installed package.
    assert all("timelypy.zip" in origin for origin, _ in data["origins"]), data["origins"]
    # and the driver left no directory of archives behind
    assert not list(temp.glob("timelypy-ship-*")), list(temp.iterdir())


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_executors_without_timelypy_show_their_import_error(tmp_path):
    # A user's own session, executors on a Python without timelypy, nothing shipped: the
    # error must carry the executor's ModuleNotFoundError, not only "finished unsuccessfully".
    python = bare_python(tmp_path)
    paths, _ = corpus(tmp_path)
    result = subprocess.run(
        [
            sys.executable,
            str(SCRIPT),
            "--master",
            "local[2]",
            "--workers",
            "2",
            str(tmp_path / "result.json"),
            *paths,
        ],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
        env=dict(os.environ, SPARK_LOCAL_IP="127.0.0.1", PYSPARK_PYTHON=str(python)),
    )
    assert result.returncode != 0
    # checked before the barrier stage: one small job, not a barrier stage's retries
    assert (
        "Spark's executors cannot run timelypy's tasks (ModuleNotFoundError: No module named "
        "'timelypy'" in result.stderr
    ), result.stderr[-3000:]
    assert str(python) in result.stderr  # names the executors' Python
    assert "ship_package" in result.stderr and "PYSPARK_PYTHON" in result.stderr
    elapsed = float(re.search(r"the run failed after ([\d.]+) s", result.stderr).group(1))
    assert elapsed < 10, elapsed


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a_module_missing_on_executors_fails_once_on_a_local_cluster(tmp_path):
    output = tmp_path / "result.json"
    result = subprocess.run(
        [
            sys.executable,
            str(ROOT / "tests" / "spark" / "scripts" / "missing_module.py"),
            "--master",
            "local-cluster[2,1,1024]",
            str(output),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
        env=dict(os.environ, SPARK_LOCAL_IP="127.0.0.1", PYSPARK_PYTHON=sys.executable),
    )
    assert result.returncode == 0, result.stderr[-4000:]
    report = json.loads(output.read_text())
    assert report["error"] == "ConfigError", report
    assert "No module named 'driver_only_helpers'" in report["message"]
    assert "cannot load the program" in report["message"] and "addPyFile" in report["message"]
    # one attempt: no stage of the run was retried, no task failed (they were cancelled)
    assert report["stages"], report
    assert all(attempt == 0 and failed == 0 for _, attempt, failed in report["stages"]), report
