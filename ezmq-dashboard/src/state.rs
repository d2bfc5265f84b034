//! What every handler shares: the client, the options, the CSRF token,
//! the sampler.

use std::sync::Arc;

use ezmq_core::Client;

use crate::sampler::Sampler;
use crate::DashboardOptions;

/// The router's state.
#[derive(Clone, Debug)]
pub(crate) struct AppState {
    pub(crate) client: Client,
    pub(crate) options: Arc<DashboardOptions>,
    /// The token every form carries and every action checks: a page of
    /// another site cannot read it, so it cannot post one of ours.
    pub(crate) csrf: Arc<str>,
    /// The numbers of the last 15 minutes, while someone looks.
    pub(crate) sampler: Arc<Sampler>,
}

impl AppState {
    pub(crate) fn new(client: Client, options: DashboardOptions) -> Self {
        AppState {
            sampler: Arc::new(Sampler::new(client.clone())),
            client,
            options: Arc::new(options),
            csrf: Arc::from(uuid::Uuid::new_v4().simple().to_string()),
        }
    }
}
