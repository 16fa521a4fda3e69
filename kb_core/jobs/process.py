"""Which process runs a job, and whether it still does: host, pid and a start marker of that process.

A pid alone is not enough: after a crash the system (or a container restart, where pids start small again) may
give the same pid to another process. The start marker is the boot id and the process's start time in clock
ticks since boot (Linux `/proc`), so a recycled pid has another marker. Without `/proc` the marker is a random
token and the check falls back to "a process with that pid exists".
"""

from __future__ import annotations

import os
import socket
import uuid
from dataclasses import dataclass
from pathlib import Path


def _start_marker(pid: int) -> str | None:
    """`<boot id>:<start time in ticks>` of process `pid`, or None when it does not exist, has ended (a zombie
    its parent has not reaped yet) or there is no /proc."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return None
    # the command name (field 2) may hold spaces and parentheses: the fields after the last ')' are fixed
    fields = stat.rsplit(")", 1)[1].split()
    if fields[0] in ("Z", "X"):  # ended
        return None
    return f"{boot[:36]}:{fields[19]}"  # field 22, starttime (fields[0] is field 3, the state)


@dataclass(frozen=True)
class ProcessIdentity:
    host: str
    pid: int
    start: str

    @classmethod
    def current(cls) -> ProcessIdentity:
        """This process (computed when called: after a fork it is the child's)."""
        pid = os.getpid()
        return cls(socket.gethostname(), pid, _start_marker(pid) or f"token:{uuid.uuid4().hex[:16]}")

    def __str__(self) -> str:
        return f"pid {self.pid} on {self.host}"

    def judge(self, other: ProcessIdentity) -> bool | None:
        """Whether the process `other` is alive, seen from this one: True, False, or None when it cannot be told
        from here (another host)."""
        if other.host != self.host:
            return None
        if other.pid == self.pid:
            return other.start == self.start  # this very process, or an earlier one with the same pid
        if other.start.startswith("token:"):  # no /proc where it ran: the pid is all there is
            try:
                os.kill(other.pid, 0)
            except ProcessLookupError:
                return False
            except PermissionError:
                return True
            return True
        marker = _start_marker(other.pid)
        return marker is not None and marker == other.start
