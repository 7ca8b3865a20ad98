"""The shared deadline (mel_opt.deadline): arithmetic, nesting, the guard timer."""

from __future__ import annotations

import math
import signal
import time

import pytest

from mel_opt import deadline
from mel_opt.deadline import Deadline, TimeLimitReached


def test_unlimited_never_expires() -> None:
    d = Deadline(None)
    assert d.end == math.inf and d.remaining() == math.inf and not d.expired()
    assert d.seconds() is None
    d.check()  # no exception


def test_remaining_and_expiry_from_a_given_start() -> None:
    now = time.perf_counter()
    late = Deadline(1.0, start=now - 2.0)  # ended a second ago
    assert late.expired() and late.remaining() == 0.0
    with pytest.raises(TimeLimitReached, match=r"time limit of 1 s reached during the scan"):
        late.check("the scan")
    early = Deadline(10.0, start=now)
    left = early.remaining()
    after = time.perf_counter()  # remaining() was read between now and after, however late
    assert not early.expired() and 10.0 - (after - now) - 1e-9 <= left <= 10.0


def test_inner_limit_never_extends_the_outer_one() -> None:
    # limits far apart (100 s against 1 s), so no pause of a loaded machine changes the order
    with deadline.limit(100.0) as outer:
        with deadline.limit(1000.0) as inner:
            assert inner is outer and deadline.current() is outer
        with deadline.limit(1.0) as shorter:
            assert shorter.end < outer.end and deadline.current() is shorter
        assert deadline.current() is outer
        assert outer.within(1000.0) is outer and outer.within(None) is outer
        assert outer.within(1.0).end < outer.end
    assert deadline.current().time_limit is None


def test_limit_counted_from_an_earlier_start() -> None:
    with deadline.limit(1.0, start=time.perf_counter() - 5.0) as d:
        assert d.expired()
        with pytest.raises(TimeLimitReached):
            deadline.check()


def test_process_start_precedes_import() -> None:
    start = deadline.process_start()
    assert start <= deadline.IMPORTED_AT <= time.perf_counter()


@pytest.mark.skipif(not hasattr(signal, "setitimer"), reason="no SIGALRM")
def test_hard_stop_interrupts_and_restores_the_handler() -> None:
    before = signal.getsignal(signal.SIGALRM)
    t = time.perf_counter()
    with pytest.raises(TimeLimitReached, match="guard timer"):
        with deadline.limit(0.2) as d, deadline.hard_stop(d, 0.05):
            while time.perf_counter() - t < 30.0:  # bounded: an unarmed guard fails, not hangs
                pass
    # Wall clock by nature: a loop that never checks is stopped only by the guard's timer.
    # Not before the limit; the upper bound is generous (a loaded machine) yet far below the
    # loop's own 30 s, so a guard that fires far too late fails too, not only a missing one.
    assert 0.2 <= time.perf_counter() - t < 0.2 + 5.0
    assert signal.getsignal(signal.SIGALRM) == before
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)


def test_hard_stop_is_quiet_when_the_block_ends_in_time() -> None:
    with deadline.limit(0.3) as d, deadline.hard_stop(d, 0.0):
        pass
    time.sleep(0.4)  # an alarm left armed would raise here


def test_a_guard_stop_carries_the_registered_incumbent() -> None:
    def overrun() -> None:
        t = time.perf_counter()
        while time.perf_counter() - t < 30.0:  # bounded: an unarmed guard fails, not hangs
            time.sleep(0.01)

    def boom() -> str:
        raise ValueError("a broken snapshot")

    for keeper, want in ((lambda: "best so far", "best so far"), (boom, None), (None, None)):
        with pytest.raises(TimeLimitReached) as info:
            with deadline.limit(0.05) as dl, deadline.hard_stop(dl, 0.02):
                if keeper is None:
                    overrun()
                with deadline.keep_incumbent(keeper):
                    overrun()
        assert info.value.incumbent == want  # a broken snapshot still stops, without one
        assert deadline._KEEPER.get() is None  # the keeper is gone with its block
