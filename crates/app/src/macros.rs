//! The crate's macros, declared before every other module so that each of them sees them.

/// `failpoint!(org_id, Point);`: fails the use case there (503) when a test armed `Point` for
/// `org_id` (feature `failpoints`, see `failpoints.rs`); otherwise expands to nothing.
macro_rules! failpoint {
    ($org_id:expr, $point:ident) => {
        #[cfg(feature = "failpoints")]
        $crate::failpoints::hit($org_id, $crate::failpoints::Failpoint::$point)?;
    };
}
