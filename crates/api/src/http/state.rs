//! What every handler can reach, and how large a body may be.

use tauros_app::App;

/// Request bodies above this are refused with 413.
pub const BODY_LIMIT: usize = 1024 * 1024;

/// What every handler can reach.
#[derive(Clone)]
pub struct AppState {
    pub app: App,
}
