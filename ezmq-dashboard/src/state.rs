//! What every handler shares: the client, the options, the CSRF token.

use std::sync::Arc;

use ezmq_core::Client;

use crate::DashboardOptions;

/// The router's state.
#[derive(Clone, Debug)]
pub(crate) struct AppState {
    pub(crate) client: Client,
    pub(crate) options: Arc<DashboardOptions>,
    /// The token every form carries and every action checks: a page of
    /// another site cannot read it, so it cannot post one of ours.
    pub(crate) csrf: Arc<str>,
}

impl AppState {
    pub(crate) fn new(client: Client, options: DashboardOptions) -> Self {
        AppState {
            client,
            options: Arc::new(options),
            csrf: Arc::from(uuid::Uuid::new_v4().simple().to_string()),
        }
    }
}
