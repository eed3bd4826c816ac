"""The warm helper's pool as the daemon counts it (cli/warm_pool.py): steady state forks nothing, a burst forks
when no worker waits (or fewer than the spares wait past the grace), never beyond the most, and a burst's extra
workers go one at a time once they have lingered; a worker asked to go is never counted again."""

from __future__ import annotations

import pytest

from gpuhook.cli.warm_pool import Pool


def _pool(spares: int = 2, most: int = 8) -> Pool:
    pool = Pool(spares, most, grace=1.0, linger=5.0)
    for pid in range(1, spares + 1):
        pool.forked(pid, 0.0)
    return pool


def test_sequential_calls_fork_nothing() -> None:
    pool = _pool()
    for i in range(500):
        now = 1.0 + i * 0.01
        pool.took(1 + i % 2, now)
        assert pool.to_fork(now) == 0
        pool.back(1 + i % 2, now + 0.005)
        assert pool.to_fork(now + 0.005) == 0
        assert pool.to_retire(now + 0.005) is None
    assert len(pool) == 2 and pool.calls == {1: 250, 2: 250}


def test_a_call_taken_before_the_last_one_came_back_forks_nothing() -> None:
    """The worker tells the daemon it is back just before its answer: the next call finds it counted."""
    pool = _pool()
    pool.took(1, 1.0)
    pool.back(1, 1.004)
    pool.took(2, 1.005)
    assert pool.to_fork(1.005) == 0


def test_no_worker_waiting_forks_at_once_up_to_the_spares() -> None:
    pool = _pool()
    pool.took(1, 1.0)
    assert pool.to_fork(1.0) == 0  # one still waits: the grace runs
    pool.took(2, 1.01)
    assert pool.to_fork(1.01) == 2


def test_fewer_than_the_spares_past_the_grace_forks() -> None:
    pool = _pool()
    pool.took(1, 1.0)
    assert pool.to_fork(1.99) == 0
    assert pool.wake(1.5) == pytest.approx(0.5)
    assert pool.to_fork(2.0) == 1
    pool.forked(3, 2.0)
    assert pool.to_fork(2.0) == 0


def test_never_more_than_the_most() -> None:
    pool = _pool(most=4)
    pool.took(1, 1.0)
    pool.took(2, 1.0)
    for pid in range(3, 10):
        n = pool.to_fork(1.0)
        if not n:
            break
        pool.forked(pid, 1.0)
        pool.took(pid, 1.0)
    assert len(pool) == 4 and pool.to_fork(5.0) == 0


def test_a_bursts_extra_workers_go_after_lingering_one_at_a_time() -> None:
    pool = _pool()
    pool.took(1, 1.0)
    pool.took(2, 1.0)
    pool.forked(3, 1.0)
    pool.forked(4, 1.0)
    pool.took(3, 1.0)
    pool.back(1, 1.1)
    pool.back(2, 1.1)
    pool.back(3, 1.1)
    assert pool.to_retire(3.0) is None  # they linger for the next burst
    assert pool.wake(3.0) == 1.0  # capped at a second
    assert pool.to_retire(6.2) == 4  # it served no call
    assert pool.to_retire(6.2) == 3  # of those that served one, the newest
    assert pool.to_retire(6.2) is None  # the spares stay
    assert set(pool.waiting) == {1, 2} and pool.leaving == {3, 4}


def test_a_worker_asked_to_go_is_not_counted_whatever_it_says_then() -> None:
    """It may have taken a call as it was asked: it finishes that call, then goes; nothing it says counts."""
    pool = _pool()
    pool.forked(3, 0.0)
    leaving = pool.to_retire(10.0)
    assert leaving is not None
    pool.took(leaving, 10.0)
    pool.back(leaving, 10.1)
    assert leaving not in pool.waiting and leaving not in pool.busy
    pool.gone(leaving, 10.2)
    assert len(pool) == 2 and pool.to_fork(10.2) == 0


def test_a_worker_gone_while_busy_is_replaced() -> None:
    pool = _pool()
    pool.took(1, 1.0)
    pool.gone(1, 1.01)  # killed, or it left after a doubtful call
    assert pool.to_fork(1.01) == 0  # one still waits: within the grace
    assert pool.to_fork(2.01) == 1
    pool.gone(2, 2.02)
    assert pool.to_fork(2.02) == 2  # none waits: at once


def test_messages_of_unknown_workers_are_ignored() -> None:
    pool = _pool()
    pool.took(99, 1.0)
    pool.back(99, 1.0)
    pool.gone(99, 1.0)
    assert len(pool) == 2 and 99 not in pool.calls


def test_workers_that_die_as_they_start_are_forked_at_most_most_times_a_second() -> None:
    pool = _pool(most=4)
    forked = 0
    pid = 10
    for step in range(100):  # every worker dies at once, 10 ms apart
        now = 1.0 + step * 0.01
        for pid_ in list(pool.waiting):
            pool.gone(pid_, now)
        for _ in range(pool.to_fork(now)):
            pid += 1
            pool.forked(pid, now)
            forked += 1
    assert forked == 4 and len(pool) == 0  # then none until a second has passed
