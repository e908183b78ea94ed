//! CPU clock ticks from /proc: a process's, and PostgreSQL's whole process tree's.

/// User plus system CPU time of process `pid` so far, in clock ticks (0 once it is gone).
pub(crate) fn cpu_ticks(pid: u32) -> u64 {
    let fields = stat_fields(pid);
    fields.get(11).copied().unwrap_or(0) + fields.get(12).copied().unwrap_or(0)
}

/// The CPU time of PostgreSQL so far, in clock ticks: the postmaster's own, its reaped
/// children's (`cutime` + `cstime`: a backend that ended is counted there once reaped) and its
/// live children's. Its difference over a window is the cluster's CPU over it, whichever
/// backends started or ended inside it (a fixed list of backend pids taken at the start misses
/// the ones that start later and loses the ones that end, down to negative figures).
pub(crate) fn cluster_ticks(postmaster: u32) -> u64 {
    let own = stat_fields(postmaster);
    let mut total: u64 = own.iter().skip(11).take(4).sum();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return total;
    };
    for entry in dir.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let fields = stat_fields(pid);
        // The parent is field 4 of the whole line: 2 after the name.
        if fields.get(1) == Some(&u64::from(postmaster)) {
            total += fields.get(11).copied().unwrap_or(0) + fields.get(12).copied().unwrap_or(0);
        }
    }
    total
}

/// The numeric fields of `/proc/{pid}/stat` after the command name, as numbers (a field that
/// is not one reads 0); empty once the process is gone.
pub(crate) fn stat_fields(pid: u32) -> Vec<u64> {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return Vec::new();
    };
    // The fields after the command name (which may hold spaces) in parentheses.
    // utime, stime, cutime and cstime are fields 14 to 17 of the whole line: 12 to 15 after
    // the name (index 11 to 14 here); the state (index 0) is a letter and reads 0.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    rest.split_whitespace()
        .map(|v| v.parse::<u64>().unwrap_or(0))
        .collect()
}
