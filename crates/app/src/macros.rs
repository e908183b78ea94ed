//! The crate's macros, declared before every other module so that each of them sees them.

/// `failpoint!(org_id, Point);`: a failpoint (tests only, feature `failpoints`; see
/// `failpoints.rs`). It fails the use case right there (503, retryable) when a test armed
/// `Point` for the organisation `org_id`; without the feature it expands to nothing.
macro_rules! failpoint {
    ($org_id:expr, $point:ident) => {
        #[cfg(feature = "failpoints")]
        $crate::failpoints::hit($org_id, $crate::failpoints::Failpoint::$point)?;
    };
}
