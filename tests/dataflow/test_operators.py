"""Tests of the operator families partition, branch, delay, accumulate, reclock, ok_err, broadcast.

Expected outputs are derived from each operator's semantics (usually by a
plain-Python model of it), except for the cases ported from Timely's own
doctests and tests, whose expected values are Timely's.
"""

import pickle
from collections import Counter, defaultdict

import pytest
from hypothesis import given
from hypothesis import strategies as st

import timelypy
from timelypy import (
    CapabilityError,
    Config,
    Err,
    InputHandle,
    Ok,
    PortError,
    ProbeHandle,
    Product,
    TimestampError,
)

WORKERS = [1, 2, 3]


def run_to_completion(workers, program):
    """``execute`` a program that returns a zero-argument function producing its result.

    The function is called after the worker has stepped its dataflows to
    completion, so everything the dataflow collected is in it.
    """

    def wrapped(worker):
        collect = program(worker)
        worker.step_while(worker.has_dataflows)
        return collect()

    return timelypy.execute(Config.process(workers), wrapped)


def drive_epochs(worker, handle, probe, epochs, feed, now):
    """Feed epoch by epoch, stepping until the probe passes each epoch; then close.

    ``now[0]`` always holds the handle's current time (infinity once closed), so
    operators downstream can record what the input had promised when they emitted.
    """
    for epoch in range(epochs):
        feed(epoch)
        handle.advance_to(epoch + 1)
        now[0] = epoch + 1
        while probe.less_than(handle.time):
            worker.step()
    handle.close()
    now[0] = float("inf")
    while not probe.done():
        worker.step()


# -- partition -------------------------------------------------------------------------


def test_partition_timely_example():
    def build(scope):
        streams = scope.to_stream(range(10)).partition(3, lambda x: (x % 3, x))
        return [stream.capture() for stream in streams]

    captured = timelypy.example(build)
    assert [c.extract() for c in captured] == [
        [(0, [x for x in range(10) if x % 3 == part])] for part in range(3)
    ]


def test_partition_transforms_records_and_keeps_times():
    def build(scope):
        numbers = scope.to_stream(range(12)).delay(lambda x, t: x % 4)
        streams = numbers.partition(2, lambda x: (x % 2, -x))
        return [stream.capture() for stream in streams]

    captured = timelypy.example(build)
    for part, queue in enumerate(captured):
        expected = defaultdict(list)
        for x in range(12):
            if x % 2 == part:
                expected[x % 4].append(-x)
        assert queue.extract() == sorted((t, sorted(xs)) for t, xs in expected.items())


def test_partition_into_zero_parts_of_nothing():
    assert timelypy.example(lambda scope: scope.to_stream([]).partition(0, lambda x: (0, x))) == []


def test_partition_rejects_bad_parts():
    with pytest.raises(ValueError, match="non-negative int"):
        timelypy.example(lambda scope: scope.to_stream([1]).partition(-1, lambda x: (0, x)))


@pytest.mark.parametrize("workers", WORKERS)
def test_partition_after_exchange(workers):
    records = list(range(60))

    def program(worker):
        seen = [[], [], []]

        def build(scope):
            mine = scope.to_stream(records[worker.index :: worker.peers])
            parts = mine.exchange(lambda x: x // 7).partition(3, lambda x: (x % 3, (x, x * x)))
            for part, stream in enumerate(parts):
                stream.inspect(seen[part].append)

        worker.dataflow(build)
        return lambda: [sorted(s) for s in seen]

    results = run_to_completion(workers, program)
    for index, seen in enumerate(results):
        for part in range(3):
            assert seen[part] == [
                (x, x * x) for x in records if (x // 7) % workers == index and x % 3 == part
            ]


@pytest.mark.parametrize("bad_part", [3, -1, "0", None])
def test_partition_out_of_range_names_operator_and_worker(bad_part):
    def program(worker):
        def route(x):
            if worker.index == 1 and x == 4:
                return bad_part, x
            return x % 3, x

        worker.dataflow(lambda scope: scope.to_stream(range(6)).partition(3, route))

    with pytest.raises(PortError) as info:
        timelypy.execute(Config.process(2), program)
    message = str(info.value)
    assert "'Partition'" in message and "worker 1" in message
    assert repr(bad_part) in message and "range(3)" in message


def test_partition_does_not_mask_errors_of_route():
    def route(x):
        if x == 2:
            raise KeyError("from the user")
        return 0, x

    with pytest.raises(KeyError, match="from the user"):
        timelypy.example(lambda scope: scope.to_stream(range(4)).partition(1, route))


@given(
    records=st.lists(st.integers(-50, 50), max_size=40),
    parts=st.integers(1, 5),
)
def test_partition_property_matches_model(records, parts):
    def build(scope):
        streams = scope.to_stream(records).partition(parts, lambda x: (x % parts, x))
        return [stream.capture() for stream in streams]

    captured = timelypy.example(build)
    for part, queue in enumerate(captured):
        expected = sorted(x for x in records if x % parts == part)
        assert queue.extract() == ([(0, expected)] if expected else [])


# -- branch ----------------------------------------------------------------------------


def test_branch_timely_example():
    def build(scope):
        odd, even = scope.to_stream(range(10)).branch(lambda time, x: x % 2 == 0)
        return odd.capture(), even.capture()

    odd, even = timelypy.example(build)
    assert odd.extract() == [(0, [1, 3, 5, 7, 9])]
    assert even.extract() == [(0, [0, 2, 4, 6, 8])]


def test_branch_condition_sees_the_time():
    calls = []

    def condition(time, x):
        calls.append((time, x))
        return time + x >= 5

    def build(scope):
        stream = scope.to_stream(range(6)).delay(lambda x, t: x % 3)
        low, high = stream.branch(condition)
        return low.capture(), high.capture()

    low, high = timelypy.example(build)
    assert sorted(calls) == sorted((x % 3, x) for x in range(6))
    expected_low, expected_high = defaultdict(list), defaultdict(list)
    for x in range(6):
        (expected_high if x % 3 + x >= 5 else expected_low)[x % 3].append(x)
    assert low.extract() == sorted(expected_low.items())
    assert high.extract() == sorted(expected_high.items())


@pytest.mark.parametrize("workers", WORKERS)
def test_branch_after_exchange(workers):
    def program(worker):
        false_seen, true_seen = [], []

        def build(scope):
            stream = scope.to_stream(range(worker.index, 40, worker.peers)).exchange(lambda x: x)
            no, yes = stream.branch(lambda t, x: x % 5 == 0)
            no.inspect(false_seen.append)
            yes.inspect(true_seen.append)

        worker.dataflow(build)
        return lambda: (sorted(false_seen), sorted(true_seen))

    for index, (no, yes) in enumerate(run_to_completion(workers, program)):
        mine = [x for x in range(40) if x % workers == index]
        assert no == [x for x in mine if x % 5 != 0]
        assert yes == [x for x in mine if x % 5 == 0]


def test_branch_when_timely_example_calls_condition_per_time():
    calls = []

    def condition(time):
        calls.append(time)
        return time >= 5

    def build(scope):
        before, after = scope.to_stream(range(10)).delay(lambda x, t: x).branch_when(condition)
        return before.capture(), after.capture()

    before, after = timelypy.example(build)
    assert before.extract() == [(t, [t]) for t in range(5)]
    assert after.extract() == [(t, [t]) for t in range(5, 10)]
    # Called with times only, once per time (each time is one batch here).
    assert sorted(calls) == list(range(10))


@pytest.mark.parametrize("workers", [2, 3])
def test_branch_when_keeps_whole_batches(workers):
    def program(worker):
        seen = ([], [])

        def build(scope):
            stream = scope.to_stream(range(30)).exchange(lambda x: x).delay(lambda x, t: x % 4)
            no, yes = stream.branch_when(lambda t: t % 2 == 1)
            no.inspect_time(lambda t, x: seen[0].append((t, x)))
            yes.inspect_time(lambda t, x: seen[1].append((t, x)))

        worker.dataflow(build)
        return lambda: (sorted(seen[0]), sorted(seen[1]))

    for index, (no, yes) in enumerate(run_to_completion(workers, program)):
        # to_stream emits range(30) on every worker, so each record arrives `workers` times.
        mine = sorted((x % 4, x) for x in range(30) if x % workers == index for _ in range(workers))
        assert no == [(t, x) for t, x in mine if t % 2 == 0]
        assert yes == [(t, x) for t, x in mine if t % 2 == 1]


# -- delay -----------------------------------------------------------------------------


def test_delay_timely_example():
    captured = timelypy.example(
        lambda scope: scope.to_stream(range(10)).delay(lambda x, t: x).capture()
    )
    assert captured.extract() == [(i, [i]) for i in range(10)]


def test_delay_batch_timely_example():
    captured = timelypy.example(
        lambda scope: scope.to_stream(range(10)).delay_batch(lambda t: t + 1).capture()
    )
    assert captured.extract() == [(1, list(range(10)))]


def test_delay_total_matches_delay():
    def build(scope):
        stream = scope.to_stream(range(20))
        return (
            stream.delay(lambda x, t: (x * 7) % 5).capture(),
            stream.delay_total(lambda x, t: (x * 7) % 5).capture(),
        )

    plain, total = timelypy.example(build)
    assert plain.extract() == total.extract()
    assert plain.extract() == [(t, [x for x in range(20) if (x * 7) % 5 == t]) for t in range(5)]


def test_delay_sends_each_time_as_one_batch():
    batches = []
    timelypy.example(
        lambda scope: (
            scope.to_stream(range(100))
            .delay(lambda x, t: x % 3)
            .inspect_batch(lambda t, xs: batches.append((t, sorted(xs))))
        )
    )
    assert sorted(batches) == [(t, [x for x in range(100) if x % 3 == t]) for t in range(3)]


@pytest.mark.parametrize("workers", WORKERS)
@pytest.mark.parametrize("kind", ["delay", "delay_total", "delay_batch"])
def test_delay_emits_only_after_completion(workers, kind):
    """Records sent at epoch e are delayed to e + 1 + k; each is emitted once, at its new
    time, on its own worker, and only after the input has advanced past that time."""
    epochs = 5

    def program(worker):
        handle, probe, now, emitted, batches = InputHandle(), ProbeHandle(), [0], [], Counter()

        def build(scope):
            stream = scope.input_from(handle)
            if kind == "delay":
                delayed = stream.delay(lambda r, t: t + 1 + r[2])
            elif kind == "delay_total":
                delayed = stream.delay_total(lambda r, t: t + 1 + r[2])
            else:
                delayed = stream.delay_batch(lambda t: t + 1 + t % 3)
            delayed.inspect_batch(lambda t, xs: batches.update([t])).inspect_time(
                lambda t, r: emitted.append((t, r, now[0]))
            ).probe_with(probe)

        worker.dataflow(build)

        def feed(epoch):
            for k in range(3):
                handle.send((epoch, worker.index, k))

        drive_epochs(worker, handle, probe, epochs, feed, now)
        return emitted, batches

    results = timelypy.execute(Config.process(workers), program)
    for index, (emitted, batches) in enumerate(results):
        expected = []
        for epoch in range(epochs):
            for k in range(3):
                shift = 1 + k if kind != "delay_batch" else 1 + epoch % 3
                expected.append((epoch + shift, (epoch, index, k)))
        assert sorted((t, r) for t, r, _ in emitted) == sorted(expected)
        for t, _, promised in emitted:
            assert t < promised, "emitted before its time was complete on the input"
        if kind != "delay_batch":
            # One batch per new time: records are held and released together.
            assert all(count == 1 for count in batches.values())


@pytest.mark.parametrize("kind", ["delay", "delay_total", "delay_batch"])
def test_delay_to_earlier_time_names_operator_and_worker(kind):
    name = {"delay": "'Delay'", "delay_total": "'DelayTotal'", "delay_batch": "'DelayBatch'"}

    def program(worker):
        def build(scope):
            stream = scope.to_stream(range(3)).delay(lambda x, t: 5)
            if kind == "delay_batch":
                return stream.delay_batch(lambda t: t - worker.index)
            method = stream.delay if kind == "delay" else stream.delay_total
            return method(lambda x, t: t - 1 if worker.index == 1 and x == 2 else t)

        worker.dataflow(build)

    with pytest.raises(CapabilityError) as info:
        timelypy.execute(Config.process(2), program)
    message = str(info.value)
    assert name[kind] in message and "worker 1" in message
    assert "from time 5 to the earlier time 4" in message


def test_delay_to_a_non_timestamp_is_a_clear_error():
    with pytest.raises(TimestampError, match=r"'Delay' \(worker 0\).*'soon'"):
        timelypy.example(lambda scope: scope.to_stream([1]).delay(lambda x, t: "soon"))


def test_delay_in_iterative_scope_uses_the_partial_order():
    def build(scope):
        def inner(loop):
            seen = []
            loop_stream = scope.to_stream(range(3)).enter(loop)
            loop_stream.delay(lambda x, t: Product(t[0], t[1] + x)).inspect_time(
                lambda t, x: seen.append((t, x))
            )
            return seen

        return scope.iterative(inner)

    assert sorted(timelypy.example(build)) == [(Product(0, x), x) for x in range(3)]


def test_delay_rejects_incomparable_product_time():
    def build(scope):
        def inner(loop):
            stream = scope.to_stream([0]).enter(loop).delay(lambda x, t: Product(0, 5))
            # (0, 5) -> (1, 2) is later lexicographically but not in the product order.
            stream.delay(lambda x, t: Product(1, 2))

        scope.iterative(inner)

    with pytest.raises(CapabilityError, match=r"from time \(0, 5\) to the earlier time \(1, 2\)"):
        timelypy.example(build)


def test_delay_total_refuses_partially_ordered_times():
    def build(scope):
        scope.iterative(lambda loop: scope.to_stream([0]).enter(loop).delay_total(lambda x, t: t))

    with pytest.raises(TypeError, match="totally ordered"):
        timelypy.example(build)


@given(st.lists(st.tuples(st.integers(0, 20), st.integers(0, 5)), max_size=30))
def test_delay_property_matches_model(pairs):
    captured = timelypy.example(
        lambda scope: scope.to_stream(pairs).delay(lambda r, t: t + r[1]).capture()
    )
    expected = defaultdict(list)
    for pair in pairs:
        expected[pair[1]].append(pair)
    assert captured.extract() == [(t, sorted(rs)) for t, rs in sorted(expected.items())]


# -- accumulate and count --------------------------------------------------------------


def test_accumulate_timely_example():
    captured = timelypy.example(
        lambda scope: (
            scope.to_stream(range(10)).accumulate(0, lambda total, xs: total + sum(xs)).capture()
        )
    )
    assert captured.extract() == [(0, [45])]


def test_count_timely_example():
    captured = timelypy.example(lambda scope: scope.to_stream(range(10)).count().capture())
    assert captured.extract() == [(0, [10])]


def test_accumulate_copies_a_mutable_default_per_time():
    def logic(acc, records):
        acc.extend(records)
        return acc

    captured = timelypy.example(
        lambda scope: (
            scope.to_stream(range(6))
            .delay(lambda x, t: x % 2)
            .accumulate([], logic)
            .map(sorted)
            .capture()
        )
    )
    assert captured.extract() == [(0, [[0, 2, 4]]), (1, [[1, 3, 5]])]


@pytest.mark.parametrize("workers", WORKERS)
def test_count_per_worker_after_completion(workers):
    """Epoch e: worker 0 sends e + 3 records, exchanged by value.  Each worker emits,
    once per epoch in which it received records, how many it received, and only
    after the epoch is complete."""
    epochs = 6

    def program(worker):
        handle, probe, now, emitted = InputHandle(), ProbeHandle(), [0], []
        worker.dataflow(
            lambda scope: (
                scope.input_from(handle)
                .exchange(lambda x: x)
                .count()
                .inspect_time(lambda t, n: emitted.append((t, n, now[0])))
                .probe_with(probe)
            )
        )

        def feed(epoch):
            if worker.index == 0:
                for x in range(epoch * 10, epoch * 10 + epoch + 3):
                    handle.send(x)

        drive_epochs(worker, handle, probe, epochs, feed, now)
        return emitted

    for index, emitted in enumerate(timelypy.execute(Config.process(workers), program)):
        expected = []
        for epoch in range(epochs):
            mine = [x for x in range(epoch * 10, epoch * 10 + epoch + 3) if x % workers == index]
            if mine:
                expected.append((epoch, len(mine)))
        assert sorted((t, n) for t, n, _ in emitted) == expected
        assert all(t < promised for t, _, promised in emitted)


# -- reclock ---------------------------------------------------------------------------


def test_reclock_timely_example():
    def build(scope):
        data = scope.to_stream(range(10)).delay(lambda x, t: x)
        clock = scope.to_stream([3, 5, 8]).delay(lambda x, t: x).map(lambda x: None)
        return data.reclock(clock).capture()

    extracted = timelypy.example(build).extract()
    assert len(extracted) == 3
    assert extracted == [(3, [0, 1, 2, 3]), (5, [4, 5]), (8, [6, 7, 8])]


@pytest.mark.parametrize("workers", WORKERS)
def test_reclock_with_broadcast_clock(workers):
    """A clock on worker 0 only, broadcast: every worker reclocks its own data by it."""
    ticks = [2, 6, 7]

    def program(worker):
        seen = []

        def build(scope):
            data = scope.to_stream(range(worker.index, 10, worker.peers)).delay(lambda x, t: x)
            clock = scope.to_stream(ticks if worker.index == 0 else []).delay(lambda x, t: x)
            data.reclock(clock.broadcast()).inspect_time(lambda t, x: seen.append((t, x)))

        worker.dataflow(build)
        return lambda: sorted(seen)

    for index, seen in enumerate(run_to_completion(workers, program)):
        expected = []
        for x in range(index, 10, workers):
            tick = next((c for c in ticks if x <= c), None)
            if tick is not None:
                expected.append((tick, x))
        assert seen == sorted(expected)


# -- ok_err and result streams ---------------------------------------------------------


def test_ok_err_timely_example():
    def build(scope):
        even, odd = scope.to_stream(range(10)).ok_err(lambda x: Ok(x) if x % 2 == 0 else Err(x))
        return even.capture(), odd.capture()

    even, odd = timelypy.example(build)
    assert even.extract() == [(0, [0, 2, 4, 6, 8])]
    assert odd.extract() == [(0, [1, 3, 5, 7, 9])]


def test_ok_err_keeps_times():
    def build(scope):
        ok, err = (
            scope.to_stream(range(8))
            .delay(lambda x, t: x % 2)
            .ok_err(lambda x: Ok(str(x)) if x < 5 else Err(-x))
        )
        return ok.capture(), err.capture()

    ok, err = timelypy.example(build)
    assert ok.extract() == [(0, ["0", "2", "4"]), (1, ["1", "3"])]
    assert err.extract() == [(0, [-6]), (1, [-7, -5])]


def test_ok_err_rejects_plain_values():
    def program(worker):
        worker.dataflow(
            lambda scope: scope.to_stream(range(3)).ok_err(
                lambda x: x if worker.index == 1 else Ok(x)
            )
        )

    with pytest.raises(TypeError, match=r"'OkErr' \(worker 1\).*neither timelypy.Ok nor"):
        timelypy.execute(Config.process(2), program)


def _results(build_tail):
    return timelypy.example(
        lambda scope: build_tail(scope.to_stream([Ok(0), Err(None)])).capture()
    ).extract()[0][1]


def test_result_stream_timely_tests():
    assert _results(lambda s: s.ok()) == [0]
    assert _results(lambda s: s.err()) == [None]
    assert _results(lambda s: s.map_ok(lambda x: 10)) == [Ok(10), Err(None)]
    assert _results(lambda s: s.map_err(lambda x: 10)) == [Ok(0), Err(10)]
    assert _results(lambda s: s.and_then(lambda x: Ok(1))) == [Ok(1), Err(None)]
    assert _results(lambda s: s.unwrap_or_else(lambda e: 10)) == [0, 10]


@pytest.mark.parametrize("method", ["ok", "err", "map_ok", "map_err", "unwrap_or_else"])
def test_result_helpers_reject_plain_records(method):
    def build(scope):
        stream = scope.to_stream([Ok(1), 2])
        if method in ("ok", "err"):
            getattr(stream, method)()
        else:
            getattr(stream, method)(lambda x: x)

    with pytest.raises(TypeError, match=r"\(worker 0\): record 2 \(int\) is neither"):
        timelypy.example(build)


def test_and_then_rejects_plain_results():
    with pytest.raises(TypeError, match=r"'AndThen' \(worker 0\): the function returned 3"):
        timelypy.example(lambda scope: scope.to_stream([Ok(1)]).and_then(lambda x: 3))


def test_ok_and_err_values():
    assert Ok(3) == Ok(3) and Ok(3) != Ok(4) and Ok(3) != Err(3) and Ok(3) != 3
    assert hash(Ok(3)) == hash(Ok(3)) and len({Ok(3), Err(3), Ok(3)}) == 2
    assert repr(Ok("a")) == "Ok('a')" and repr(Err([1])) == "Err([1])"
    assert sorted([Err(0), Ok(5), Err(-1), Ok(1)]) == [Ok(1), Ok(5), Err(-1), Err(0)]
    assert Ok(1) <= Ok(1) and Err(0) > Ok(9) and Err(0) >= Err(0)
    assert Ok(1).is_ok() and not Ok(1).is_err() and Err(1).is_err() and not Err(1).is_ok()
    assert pickle.loads(pickle.dumps(Err((1, "x")))) == Err((1, "x"))
    with pytest.raises(AttributeError, match="immutable"):
        Ok(1).value = 2
    with pytest.raises(TypeError, match="cannot be subclassed"):
        type("MyOk", (Ok,), {})
    match Err("boom"):
        case Ok(value):
            matched = ("ok", value)
        case Err(value):
            matched = ("err", value)
    assert matched == ("err", "boom")


# -- broadcast -------------------------------------------------------------------------


def test_broadcast_one_worker_timely_example():
    captured = timelypy.example(lambda scope: scope.to_stream(range(10)).broadcast().capture())
    assert captured.extract() == [(0, list(range(10)))]


@pytest.mark.parametrize("workers", WORKERS)
def test_broadcast_every_worker_sees_every_record_once(workers):
    """Each worker sends its own records at several epochs; after broadcast every worker
    has every record of every worker exactly once, at its time, and counts per time
    (which complete only if progress counts meet) equal the global totals."""
    epochs = 4

    def program(worker):
        handle, probe, now = InputHandle(), ProbeHandle(), [0]
        seen, counts, lists = [], [], []

        def build(scope):
            # One reader per stream, so the lists inspected are the ones broadcast sent.
            (
                scope.input_from(handle)
                .broadcast()
                .inspect_batch(lambda t, xs: lists.append(xs))
                .inspect_time(lambda t, x: seen.append((t, x)))
                .count()
                .inspect_time(lambda t, n: counts.append((t, n, now[0])))
                .probe_with(probe)
            )

        worker.dataflow(build)

        def feed(epoch):
            for k in range(epoch + worker.index):
                handle.send((worker.index, k))

        drive_epochs(worker, handle, probe, epochs, feed, now)
        return seen, counts, lists

    results = timelypy.execute(Config.process(workers), program)
    everything = sorted(
        (epoch, (w, k)) for epoch in range(epochs) for w in range(workers) for k in range(epoch + w)
    )
    totals = Counter(t for t, _ in everything)
    for seen, counts, _ in results:
        assert sorted(seen) == everything
        assert sorted((t, n) for t, n, _ in counts) == sorted(totals.items())
        assert all(t < promised for t, _, promised in counts)
    # No two workers ever hold the same list object.
    owners = {}
    for index, (_, _, lists) in enumerate(results):
        for batch in lists:
            assert owners.setdefault(id(batch), index) == index


@pytest.mark.parametrize("workers", [2, 3])
def test_broadcast_of_to_stream_multiplies_by_workers(workers):
    def program(worker):
        seen = []
        worker.dataflow(
            lambda scope: scope.to_stream([worker.index]).broadcast().inspect(seen.append)
        )
        return lambda: sorted(seen)

    assert run_to_completion(workers, program) == [list(range(workers))] * workers


@pytest.mark.parametrize("workers", [2, 3, 4])
def test_one_record_batches_are_exchanged_by_key(workers):
    # A batch of one record (a small epoch's) goes whole to its worker: the same
    # routing as a longer batch's, for a power of two (a mask) and otherwise (%).
    def program(worker):
        handle = timelypy.InputHandle()
        seen = []
        probe = worker.dataflow(
            lambda scope: (
                scope.input_from(handle)
                .exchange(lambda x: x - 7)
                .inspect_batch(lambda t, data: seen.append((t, list(data))))
                .probe()
            )
        )
        for epoch in range(12):
            handle.send(epoch * workers + worker.index)
            handle.advance_to(epoch + 1)
            while probe.less_than(epoch + 1):
                worker.step()
        return seen

    for index, seen in enumerate(timelypy.execute(Config.process(workers), program)):
        expected = [(x // workers, [x]) for x in range(12 * workers) if (x - 7) % workers == index]
        assert sorted(seen) == expected, f"worker {index}"


@pytest.mark.parametrize("records", [[1], [1, 2]])
def test_a_bad_exchange_key_names_the_exchanging_operator_only(records):
    from timelypy.errors import ExchangeKeyError

    def program(worker):
        worker.dataflow(lambda scope: scope.to_stream(records).exchange(lambda x: "key").probe())

    with pytest.raises(ExchangeKeyError, match=r"operator 'Exchange' \(worker") as info:
        timelypy.execute(Config.process(2), program)
    notes = getattr(info.value, "__notes__", [])
    assert not any("ToStream" in note for note in notes), notes


@pytest.mark.parametrize("records", [[1], [1, 2]])
def test_a_raising_exchange_key_is_named_as_the_exchange_s(records):
    def key(x):
        raise KeyError("no key for this record")

    def program(worker):
        worker.dataflow(lambda scope: scope.to_stream(records).exchange(key).probe())

    with pytest.raises(KeyError) as info:
        timelypy.execute(Config.process(2), program)
    notes = info.value.__notes__
    assert any("exchange key function of operator 'Exchange'" in note for note in notes)
    assert not any("ToStream" in note for note in notes), notes


def _routed_by(pact, workers, records):
    """What each worker receives through ``pact`` when every worker sends ``records``."""

    def program(worker):
        seen = []

        def constructor(cap, info):
            def logic(inp, out):
                for _, data in inp:
                    seen.extend(data)

            return logic

        worker.dataflow(
            lambda scope: scope.to_stream(list(records)).unary(pact, "Route", constructor)
        )
        return lambda: sorted(seen)

    return run_to_completion(workers, program)


@pytest.mark.parametrize("workers", [2, 3])
def test_an_exchange_partition_splits_whole_batches_where_the_key_would(workers):
    from timelypy.dataflow.channels import Exchange

    calls = []

    def partition(records, peers):
        calls.append(len(records))
        parts = [[] for _ in range(peers)]
        for r in records:
            parts[r % peers].append(r)
        return parts

    records = list(range(20))
    by_key = _routed_by(Exchange(lambda r: r), workers, records)
    assert _routed_by(Exchange(lambda r: r, partition=partition), workers, records) == by_key
    assert calls and all(n == len(records) for n in calls)
    # every worker sent every record: each arrives once from each of them
    assert by_key == [
        sorted([r for r in records if r % workers == i] * workers) for i in range(workers)
    ]


def test_a_raising_partition_leaves_the_batch_to_the_key():
    from timelypy.dataflow.channels import Exchange
    from timelypy.errors import ExchangeKeyError

    def partition(records, peers):
        raise TypeError("not this batch")

    records = list(range(10))
    assert _routed_by(Exchange(lambda r: r, partition=partition), 2, records) == _routed_by(
        Exchange(lambda r: r), 2, records
    )
    with pytest.raises(ExchangeKeyError, match="must return an int"):
        _routed_by(Exchange(lambda r: "key", partition=partition), 2, records)


def test_an_exchange_partition_must_be_callable():
    from timelypy.dataflow.channels import Exchange

    with pytest.raises(TypeError, match="partition must be callable"):
        Exchange(lambda r: r, partition=3)


@pytest.mark.parametrize(
    "partition",
    [
        lambda records, peers: [records[:3]],  # too few lists, records lost
        lambda records, peers: [records, [], []],  # too many lists
        lambda records, peers: [records, records],  # records twice
        lambda records, peers: None,
    ],
)
def test_a_partition_that_loses_or_adds_records_is_refused_naming_the_operator(partition):
    from timelypy.dataflow.channels import Exchange
    from timelypy.errors import ExchangeKeyError

    with pytest.raises(ExchangeKeyError, match=r"operator 'Route' \(worker \d\).*one list per"):
        _routed_by(Exchange(lambda r: r, partition=partition), 2, list(range(10)))
