//! Two allocator arenas per core, set before the first thread starts (docs/DECISIONS.md, "Two
//! allocator arenas per core").
//!
//! glibc's allocator gives a thread that finds the arenas in use an arena of its own, up to
//! eight per core, and each arena keeps what is freed into it. The SQLite backend runs one
//! thread per connection (nine on a default pool) besides the runtime's: under load they fill
//! a dozen arenas, and the server's peak resident memory under load passes its 50 MiB target.
//! Two arenas per core keep it under at the same throughput; one per core would make SQLite's
//! reader threads wait on each other's arena locks (docs/PERFORMANCE.md, "Design choices the
//! figures justify").
//!
//! An operator's own `MALLOC_ARENA_MAX` (or `glibc.malloc.arena_max` in `GLIBC_TUNABLES`),
//! which glibc reads when the process starts, is left as it is.

/// The arena limit to set, if any: `None` when the environment already names one, otherwise
/// two for each core Tauros may run on (glibc's own default is eight).
pub fn arena_limit(arena_max: Option<&str>, tunables: Option<&str>, cores: usize) -> Option<usize> {
    let named_by_tunables = tunables.is_some_and(|t| {
        t.split(':')
            .any(|setting| setting.trim_start().starts_with("glibc.malloc.arena_max="))
    });
    if arena_max.is_some() || named_by_tunables {
        return None;
    }
    Some(cores.max(1) * 2)
}

/// Limits the allocator's arenas to two per core unless the environment names a limit. Call
/// it before any thread is spawned: glibc fixes the limit when a second arena is first needed.
pub fn limit_arenas() {
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    let limit = arena_limit(
        std::env::var("MALLOC_ARENA_MAX").ok().as_deref(),
        std::env::var("GLIBC_TUNABLES").ok().as_deref(),
        cores,
    );
    if let Some(limit) = limit {
        set_arena_max(limit);
    }
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)]
fn set_arena_max(limit: usize) {
    let limit = libc::c_int::try_from(limit).unwrap_or(libc::c_int::MAX);
    // SAFETY: `mallopt` takes two integers and changes one of the allocator's parameters; it
    // reads and writes no memory of ours and is safe to call at any time (glibc applies it to
    // arenas created afterwards). Its answer says whether the parameter was accepted: a
    // refusal leaves glibc's default, which is only the memory this saves.
    let _accepted = unsafe { libc::mallopt(libc::M_ARENA_MAX, limit) };
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn set_arena_max(_limit: usize) {}

#[cfg(test)]
mod tests {
    use super::arena_limit;

    #[test]
    fn two_arenas_per_core_unless_the_environment_names_a_limit() {
        assert_eq!(arena_limit(None, None, 2), Some(4));
        assert_eq!(arena_limit(None, None, 16), Some(32));
        assert_eq!(arena_limit(None, None, 0), Some(2));
        // Other tunables leave the choice to us.
        assert_eq!(
            arena_limit(None, Some("glibc.malloc.tcache_count=0"), 4),
            Some(8)
        );
        // The operator's own limit stands, by either spelling.
        assert_eq!(arena_limit(Some("8"), None, 2), None);
        assert_eq!(
            arena_limit(
                None,
                Some("glibc.malloc.tcache_count=0:glibc.malloc.arena_max=4"),
                2
            ),
            None
        );
        assert_eq!(arena_limit(None, Some("glibc.malloc.arena_max=1"), 2), None);
    }
}
