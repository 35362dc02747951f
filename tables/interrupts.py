"""Ctrl-C and SIGTERM as one kind of interruption, and moments that must not be cut.

A service manager stops a process with SIGTERM, a person with Ctrl-C: both must leave
either a whole dataset or none. :func:`terminate_as_interrupt` turns SIGTERM into the
same :class:`KeyboardInterrupt` Ctrl-C raises, and :func:`interrupts_deferred` holds both
back while a dataset is being moved into place, so no interruption can land between the
rename and the message that says whether the dataset was written.

:func:`signals_as_interrupt` has Ctrl-C raise :class:`Interrupted` too, never Python's
own KeyboardInterrupt: that one, raised while code made by ``exec`` or ``eval`` from a
string runs (dataclasses and namedtuple make their methods so), marks the interpreter as
ended by an unhandled Ctrl-C even when it is handled, and a program run with ``python
-m`` then kills itself with SIGINT once it has exited with its own status. It also sets
aside PySpark's Ctrl-C handler, which cancels the jobs from inside the handler: before
Spark's logging is quieted (a warning per killed task), and by a call to the JVM that
fails when the interrupted thread is in the middle of one itself.

A signal whose handler runs inside a finalizer (``__del__``, a weakref callback) cannot
stop the run there: Python prints the exception the handler raised and drops it. Within
:func:`signals_as_interrupt` such a signal is sent again to the main thread, so it lands
in the run's own code a moment later, and nothing is printed.
"""

from __future__ import annotations

import _thread
import contextlib
import signal
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Interrupted(KeyboardInterrupt):
    """A signal stopped the run; ``written`` when the dataset was complete at OUT by then."""

    def __init__(self, signum: int, written: bool = False) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum
        self.written = written


def exit_status(interrupt: KeyboardInterrupt) -> int:
    """The shell's convention: 128 plus the signal's number (130 for Ctrl-C)."""
    return 128 + getattr(interrupt, "signum", signal.SIGINT)


def _in_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def terminate_as_interrupt() -> contextlib.AbstractContextManager[None]:
    """Within the block, SIGTERM raises :class:`Interrupted` as Ctrl-C raises
    KeyboardInterrupt."""
    return signals_as_interrupt((signal.SIGTERM,))


@contextmanager
def signals_as_interrupt(signums: Iterable[int] = _SIGNALS) -> Iterator[None]:
    """Within the block, each of ``signums`` raises :class:`Interrupted` (signal handlers
    can only be set from the main thread). One the process ignores stays ignored: a shell
    starts a background command with Ctrl-C ignored."""
    if not _in_main_thread():
        yield
        return

    def interrupt(signum: int, frame: FrameType | None) -> None:
        raise Interrupted(signum)

    previous = {
        signum: signal.signal(signum, interrupt)
        for signum in signums
        if signal.getsignal(signum) is not signal.SIG_IGN
    }
    previous_hook = sys.unraisablehook
    block_open = threading.Event()
    block_open.set()
    sys.unraisablehook = _sending_again(previous_hook, set(previous), block_open)
    try:
        yield
    finally:
        block_open.clear()
        sys.unraisablehook = previous_hook
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _sending_again(
    previous_hook: Callable[[Any], object], signums: set[int], block_open: threading.Event
) -> Callable[[Any], object]:
    """An unraisable-exception hook that sends a signal of ``signums`` whose
    :class:`Interrupted` a finalizer swallowed to the main thread again, from another
    thread: the hook runs inside the finalizer's caller, where the handler could run and be
    swallowed once more. Anything else goes to ``previous_hook``."""

    def hook(unraisable: Any) -> None:
        swallowed = unraisable.exc_value
        if not isinstance(swallowed, Interrupted) or swallowed.signum not in signums:
            previous_hook(unraisable)
            return
        signum = swallowed.signum
        while True:
            try:
                _thread.start_new_thread(_send_to_main, (signum, block_open))
                return
            except Interrupted as again:  # the thread sent it before the hook was done
                signum = again.signum

    return hook


def _send_to_main(signum: int, block_open: threading.Event) -> None:
    """The signal again, to the main thread, while the block that swallowed it is open
    (its handler answers it then, or one it holds: a nested block's, the deferring one
    of :func:`interrupts_deferred`): a real signal, so a blocking call the main thread is
    in returns to let the handler run. Once the block has ended, the run is past the work
    the signal was meant to stop."""
    if block_open.is_set():
        signal.pthread_kill(threading.main_thread().ident, signum)


@contextmanager
def interrupts_deferred() -> Iterator[list[int]]:
    """SIGINT and SIGTERM received within the block are only recorded, in the list the
    block gets; the caller decides what they mean once the block is done."""
    received: list[int] = []
    if not _in_main_thread():
        yield received
        return

    def record(signum: int, frame: FrameType | None) -> None:
        received.append(signum)

    previous = {signum: signal.signal(signum, record) for signum in _SIGNALS}
    try:
        yield received
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
