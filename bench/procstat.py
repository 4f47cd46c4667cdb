"""A process's CPU time and memory, read from /proc (shared by the benchmarks)."""
import os

CLK_TCK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    """user + system CPU seconds of a process."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    # after "pid (comm)": state is fields[0]; utime, stime are fields 11, 12 (stat fields 14, 15)
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def mem_kib(pid):
    """VmRSS and VmHWM (peak) in KiB."""
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            name, _, value = line.partition(":")
            if name in ("VmRSS", "VmHWM"):
                out[name] = int(value.split()[0])
    return out
