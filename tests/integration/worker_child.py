"""Stand-ins for the supervisor tests, run as scripts (real processes, real signals).

`worker_child.py supervise COUNT BEHAVIOUR STOP_TIMEOUT` runs a `Supervisor` of COUNT stand-in
workers with its signal handling on, and exits with the status `run()` returns.

`worker_child.py INDEX LIFELINE BEHAVIOUR` is one stand-in worker. It prints `ready INDEX PID`,
then waits for SIGTERM / SIGINT or for its lifeline to close, prints what ended the wait
(`INDEX stopped by SIGTERM`, `INDEX lifeline closed`) and exits. BEHAVIOUR: `serve` exits 0
then; `fail-on-stop` exits 4; `stubborn` ignores SIGTERM (only SIGKILL or the lifeline's end
stop it). Whatever the behaviour, SIGUSR1 makes a worker exit 3 at once, as a crash, and SIGHUP
makes it print `INDEX reloaded`.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys


def say(line: str) -> None:
    os.write(1, f"{line}\n".encode())  # one write: lines of several workers never interleave


async def main(index: int, lifeline: int, behaviour: str) -> int:
    loop = asyncio.get_running_loop()
    ended: asyncio.Future[str] = loop.create_future()

    def end(reason: str) -> None:
        if not ended.done():
            ended.set_result(reason)

    for sig in (signal.SIGTERM, signal.SIGINT):
        if behaviour == "stubborn" and sig == signal.SIGTERM:
            signal.signal(sig, signal.SIG_IGN)
        else:
            loop.add_signal_handler(sig, end, f"stopped by {sig.name}")
    loop.add_signal_handler(signal.SIGUSR1, end, "crash")
    loop.add_signal_handler(signal.SIGHUP, say, f"{index} reloaded")
    loop.add_reader(lifeline, end, "lifeline closed")  # readable only at its end
    say(f"ready {index} {os.getpid()}")
    reason = await ended
    if reason == "crash":
        return 3
    say(f"{index} {reason}")
    return 4 if behaviour == "fail-on-stop" else 0


def supervise(count: int, behaviour: str, stop_timeout: float) -> int:
    from a2a_grpc.server.ops.workers import Supervisor

    def command(index: int, lifeline: int) -> list[str]:
        return [sys.executable, __file__, str(index), str(lifeline), behaviour]

    return asyncio.run(Supervisor(command, count, stop_timeout=stop_timeout).run())


if __name__ == "__main__":
    if sys.argv[1] == "supervise":
        sys.exit(supervise(int(sys.argv[2]), sys.argv[3], float(sys.argv[4])))
    index, lifeline, behaviour = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    os.set_blocking(lifeline, False)
    sys.exit(asyncio.run(main(index, lifeline, behaviour)))
