"""CPU seconds used so far (user + system, Linux /proc) by a process tree or by every process of
one command name; the load benchmarks difference two readings to get CPU per request.

Usage: proc_cpu.py tree PID       the process and all its descendants
       proc_cpu.py command NAME   every process whose command name is NAME (e.g. postgres)
"""

import os
import sys
from collections.abc import Iterator
from pathlib import Path


def _cpu_ticks(pid: int) -> int:
    # /proc/PID/stat fields after the command's closing parenthesis: utime is the 12th, stime
    # the 13th (proc(5)).
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def _tree(pid: int, *, root: bool = True) -> Iterator[int]:
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        if root:
            raise
        return  # a descendant that exited meanwhile
    yield pid
    for child in children:
        yield from _tree(int(child), root=False)


def _by_command(name: str) -> Iterator[int]:
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (entry / "comm").read_text().strip() == name:
                    yield int(entry.name)
            except OSError:  # exited meanwhile
                continue


def tree_cpu_s(pid: int) -> float:
    """CPU seconds of ``pid`` and its descendants; OSError when ``pid`` itself is gone."""
    return _cpu_s(_tree(pid))


def command_cpu_s(name: str) -> float:
    return _cpu_s(_by_command(name))


def _cpu_s(pids: Iterator[int]) -> float:
    ticks = 0
    for pid in pids:
        try:
            ticks += _cpu_ticks(pid)
        except OSError:  # exited meanwhile: its CPU is no longer counted anywhere
            continue
    return ticks / os.sysconf("SC_CLK_TCK")


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("tree", "command"):
        sys.exit("usage: proc_cpu.py tree PID | command NAME")
    mode, target = sys.argv[1:]
    try:
        print(tree_cpu_s(int(target)) if mode == "tree" else command_cpu_s(target))
    except (OSError, ValueError) as error:
        sys.exit(f"error: {mode} {target}: {error}")
