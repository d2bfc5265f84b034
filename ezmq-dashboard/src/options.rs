//! [`DashboardOptions`]: who may look, and whether they may act.

use std::fmt;

/// How a dashboard is served: read-only or not, and the credential it
/// asks for.
///
/// ```
/// use ezmq_dashboard::DashboardOptions;
///
/// let options = DashboardOptions::new()
///     .with_basic_auth("ops", "s3cret")
///     .read_only(true);
/// assert!(options.is_read_only());
/// ```
#[derive(Clone, Default)]
pub struct DashboardOptions {
    read_only: bool,
    basic_auth: Option<(String, String)>,
}

impl fmt::Debug for DashboardOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DashboardOptions")
            .field("read_only", &self.read_only)
            .field(
                "basic_auth",
                &self.basic_auth.as_ref().map(|(user, _)| (user, "***")),
            )
            .finish()
    }
}

impl DashboardOptions {
    /// Actions allowed, no credential asked.
    pub fn new() -> Self {
        DashboardOptions::default()
    }

    /// `true`: pages only, every action (requeue, purge, cancel, pause)
    /// refused with 403 and its buttons not shown.
    #[must_use]
    pub fn read_only(mut self, read_only: bool) -> Self {
        self.read_only = read_only;
        self
    }

    /// Asks for HTTP basic authentication with `user` and `password` on
    /// every request (401 otherwise).
    #[must_use]
    pub fn with_basic_auth(mut self, user: impl Into<String>, password: impl Into<String>) -> Self {
        self.basic_auth = Some((user.into(), password.into()));
        self
    }

    /// True when actions are refused.
    pub fn is_read_only(&self) -> bool {
        self.read_only
    }

    pub(crate) fn basic_auth(&self) -> Option<&(String, String)> {
        self.basic_auth.as_ref()
    }
}
