"""Runs a function in a forked child with a time limit, so that a test can tell a hang or a crash
(a signal, a segfault) from an answer: run(f) is ("ok", value), ("raised", type name, message),
("hang", seconds) or ("crash", signal or exit code)."""

import os
import pickle
import select
import signal
import time


def run(function, timeout=20.0):
    reader, writer = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: answer through the pipe, then leave without cleanup
        os.close(reader)
        try:
            result = ("ok", function())
        except BaseException as e:  # noqa: BLE001 - every outcome is reported, none re-raised
            result = ("raised", type(e).__name__, str(e))
        try:
            data = pickle.dumps(result)
        except Exception as e:  # noqa: BLE001
            data = pickle.dumps(("raised", "PicklingError", str(e)))
        with os.fdopen(writer, "wb") as out:
            out.write(data)
        os._exit(0)
    os.close(writer)
    chunks, deadline = [], time.monotonic() + timeout
    with os.fdopen(reader, "rb") as source:
        while True:
            left = deadline - time.monotonic()
            ready, _, _ = select.select([source], [], [], max(left, 0.0))
            if not ready:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                return ("hang", timeout)
            chunk = os.read(source.fileno(), 1 << 16)
            if not chunk:
                break
            chunks.append(chunk)
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        return ("crash", os.WTERMSIG(status))
    if not chunks:
        return ("crash", os.WEXITSTATUS(status))
    return pickle.loads(b"".join(chunks))
