#!/usr/bin/env python3
"""cpusnap.py - CPU time consumed so far, for tests/bench/run.

    cpusnap.py pg=PID app=PID[,PID...] web=PID[,PID...]

Prints one line "pg=T app=T web=T kern=T steal=T busy=T total=T", T in
clock ticks:
  pg     the postmaster PID, its live children, and what its exited
         children used (cutime + cstime: backends that ended meanwhile)
  app    the listed processes (all their threads)
  web    the listed processes
  kern   the kernel's threads (kthreadd and its children: the disk's and
         the network's work, the benchmark's own for the most part)
  steal  time the hypervisor gave to others, from /proc/stat (no
         process's; interrupts are charged to the process they interrupt)
  busy   all CPUs, from /proc/stat: everything but idle and iowait
  total  all CPUs, everything
The difference of two snapshots is what a run cost.  A process that is
gone counts 0 (take both snapshots while the processes run).
"""
import os
import sys


def stat(pid):
    """(utime + stime, cutime + cstime, ppid) of pid, or None."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            rest = f.read().rpartition(")")[2].split()
    except OSError:
        return None
    # rest[0] is field 3 (state): utime is field 14, cstime field 17
    return (int(rest[11]) + int(rest[12]), int(rest[13]) + int(rest[14]),
            int(rest[1]))


def pg_ticks(root):
    own = stat(root)
    if own is None:
        return 0
    total = own[0] + own[1]
    for d in os.listdir("/proc"):
        if d.isdigit():
            s = stat(int(d))
            if s is not None and s[2] == root:
                total += s[0]
    return total


def kernel_ticks():
    """CPU of kthreadd (pid 2) and of the kernel threads it started."""
    total = 0
    for d in os.listdir("/proc"):
        if d.isdigit():
            s = stat(int(d))
            if s is not None and (int(d) == 2 or s[2] == 2):
                total += s[0]
    return total


def pids_ticks(pids):
    total = 0
    for p in pids:
        s = stat(p)
        if s is not None:
            total += s[0]
    return total


def main():
    groups = {"pg": [], "app": [], "web": []}
    for a in sys.argv[1:]:
        name, _, val = a.partition("=")
        if name in groups:
            groups[name] = [int(x) for x in val.split(",") if x.strip()]
    out = []
    out.append("pg=%d" % (pg_ticks(groups["pg"][0]) if groups["pg"] else 0))
    out.append("app=%d" % pids_ticks(groups["app"]))
    out.append("web=%d" % pids_ticks(groups["web"]))
    out.append("kern=%d" % kernel_ticks())
    with open("/proc/stat") as f:
        cpu = [int(x) for x in f.readline().split()[1:]]
    # steal: time no process of this machine is charged with
    out.append("steal=%d" % (cpu[7] if len(cpu) > 7 else 0))
    idle = cpu[3] + (cpu[4] if len(cpu) > 4 else 0)
    # guest time is already included in user
    total = sum(cpu[:8])
    out.append("busy=%d" % (total - idle))
    out.append("total=%d" % total)
    print(" ".join(out))


if __name__ == "__main__":
    main()
