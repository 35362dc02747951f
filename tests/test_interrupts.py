"""Signals as interruptions: what :mod:`pwcap.tables.interrupts` promises the runs that use it."""

from __future__ import annotations

import signal
import sys
import time

import pytest

from pwcap.tables.interrupts import Interrupted, interrupts_deferred, signals_as_interrupt


def polling_for(seconds: float) -> None:
    """What a run's main thread does while it waits: short blocking calls, one after the
    other. (A signal that arrives just before a blocking call starts is answered when the
    call returns, in CPython, whoever sends it.)"""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        time.sleep(0.05)


class SignalledWhenFinalized:
    """An object whose finalizer is running when ``signum`` arrives."""

    def __init__(self, signum: int) -> None:
        self.signum = signum

    def __del__(self) -> None:
        signal.raise_signal(self.signum)


class SignalledAndHeldWhenFinalized(SignalledWhenFinalized):
    """As above, and the main thread holds ``signum`` back from then on: the signal sent
    again waits, pending, until the test lets it through."""

    def __del__(self) -> None:
        try:
            super().__del__()
        finally:
            signal.pthread_sigmask(signal.SIG_BLOCK, [self.signum])


class FailsWhenFinalized:
    def __del__(self) -> None:
        raise ValueError("a finalizer's own failure")


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_swallowed_by_a_finalizer_interrupts_the_block_soon_after(
    signum: int, capfd: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(Interrupted) as stopped, signals_as_interrupt():
        SignalledWhenFinalized(signum)  # dropped at once: its __del__ gets the signal
        polling_for(seconds=10)
    assert stopped.value.signum == signum
    assert capfd.readouterr().err == ""  # no "Exception ignored in" and its traceback


def test_a_swallowed_signal_sent_again_while_interrupts_are_deferred_is_recorded() -> None:
    """Sent again as the run moves its dataset into place: the moment's own handler has it,
    and the caller raises it once the dataset is there, as it does any other signal."""
    with signals_as_interrupt():
        SignalledAndHeldWhenFinalized(signal.SIGTERM)
        with interrupts_deferred() as received:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGTERM])
            deadline = time.monotonic() + 10
            while not received and time.monotonic() < deadline:
                time.sleep(0.01)
    assert received == [signal.SIGTERM]


def test_other_failures_of_finalizers_still_reach_the_hook_that_was_there() -> None:
    seen: list[BaseException] = []
    previous, sys.unraisablehook = sys.unraisablehook, lambda u: seen.append(u.exc_value)
    try:
        with signals_as_interrupt():
            FailsWhenFinalized()
    finally:
        sys.unraisablehook = previous
    assert [type(error) for error in seen] == [ValueError]


def test_a_signal_the_block_does_not_handle_is_left_to_the_outer_one() -> None:
    with pytest.raises(Interrupted) as stopped, signals_as_interrupt():
        with signals_as_interrupt([signal.SIGTERM]):
            SignalledWhenFinalized(signal.SIGINT)
        polling_for(seconds=10)
    assert stopped.value.signum == signal.SIGINT


def test_the_block_puts_back_the_handlers_and_the_hook_it_found() -> None:
    handlers = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
    hook = sys.unraisablehook
    with signals_as_interrupt():
        assert sys.unraisablehook is not hook
    assert sys.unraisablehook is hook
    assert {signum: signal.getsignal(signum) for signum in handlers} == handlers
