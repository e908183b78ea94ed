//! Two allocator arenas per core, set before the first thread starts (why: docs/DECISIONS.md,
//! "Two allocator arenas per core"). An operator's own `MALLOC_ARENA_MAX` (or
//! `glibc.malloc.arena_max` in `GLIBC_TUNABLES`), which glibc reads at start, is left as it is.

/// The arena limit to set: `None` when the environment names one, else two per usable core.
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
    // SAFETY: `mallopt` takes two integers and reads or writes no memory of ours; glibc applies
    // it to arenas created afterwards. A refusal (its answer) leaves glibc's default, costing
    // only the memory this saves.
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
