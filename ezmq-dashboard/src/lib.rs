//! A web dashboard for any ezmq broker: an [`axum`] [`Router`] a service
//! mounts, or `ezmq dashboard` serves.
//!
//! Pages:
//! - **Topics** (`/`): every topic ([`Admin::topics`](ezmq_core::Admin::topics))
//!   with its waiting, scheduled, in-flight and dead-lettered jobs, its
//!   rates (jobs in, done and failed per second over the last minute), a
//!   line of its backlog over the last 15 minutes, whether it is paused,
//!   and its live listeners;
//! - **a topic** (`/topics/{topic}`): its numbers, live listeners, waiting
//!   jobs (where the broker can peek), scheduled and retrying jobs with
//!   *Run now* and *Cancel* (where it has a job store), dead letters with
//!   their error, *Requeue* one or all and *Purge* (typing the topic's
//!   name), *Pause* / *Resume*;
//! - **Cron** (`/cron`): the crontabs running now, their next and last
//!   tick, where they run, their recent runs;
//! - **Groups** (`/groups`): the broadcast groups of the topics live
//!   members consume (and of any topic asked by name), with their live
//!   members, waiting messages and the processes running them
//!   ([`Admin::groups`](ezmq_core::Admin::groups));
//! - **Processes** (`/processes`): every client running listeners or
//!   crontabs now ([`Admin::participants`](ezmq_core::Admin::participants));
//! - **Health** (`/health`): the broker's server, version and other facts,
//!   and its nodes up or down ([`Admin::health`](ezmq_core::Admin::health)).
//!
//! Everything goes through [`Admin`](ezmq_core::Admin) and the crontab
//! crate's readers, never a broker's commands: what a broker cannot do is
//! said on the page. Pages are server-rendered HTML with no script and no
//! asset from elsewhere (it works with no network but the broker's); every
//! value from the broker is escaped; charts are inline SVG.
//!
//! The load on the broker: each page load reads it once (the overview:
//! presence once, the topic list, then about five calls per topic, 16
//! topics at a time). For the rates and lines, a page view also starts a
//! sampler that makes the overview's reads every 10 seconds, and stops
//! once no page was viewed for 15 minutes: a dashboard nobody looks at
//! reads nothing. Done and failed counts come from the live listeners'
//! presence records (every 5 s), so they cost the workers one counter
//! each and the broker nothing more.
//!
//! Safe by default: actions are POSTs carrying a per-process CSRF token,
//! each logged as an audit line (target `ezmq_dashboard::audit`);
//! [`DashboardOptions::read_only`] refuses them all and
//! [`DashboardOptions::with_basic_auth`] asks for a credential. Broker
//! URLs and passwords never reach a page. `ezmq dashboard` binds to
//! `127.0.0.1` unless told otherwise.
//!
//! ```no_run
//! # async fn demo(client: ezmq_core::Client) -> Result<(), Box<dyn std::error::Error>> {
//! // `client`: from `ezmq::connect_url`, say.
//! let app = ezmq_dashboard::router(client, ezmq_dashboard::DashboardOptions::new());
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:9090").await?;
//! axum::serve(listener, app).await?;
//! # Ok(()) }
//! ```

mod actions;
mod auth;
mod history;
mod html;
mod options;
mod pages;
mod sampler;
mod snapshot;
mod sparkline;
mod state;

use axum::routing::{get, post};
use axum::Router;
use ezmq_core::Client;

pub use axum;
pub use options::DashboardOptions;

use state::AppState;

/// The dashboard's routes, to serve or to nest in a service's router.
pub fn router(client: Client, options: DashboardOptions) -> Router {
    let state = AppState::new(client, options);
    Router::new()
        .route("/", get(pages::overview::show))
        .route("/topic", get(pages::overview::open))
        .route("/topics/{topic}", get(pages::topic::show))
        .route("/topics/{topic}/{verb}", post(actions::pause))
        .route(
            "/topics/{topic}/dead-letters/requeue",
            post(actions::requeue),
        )
        .route("/topics/{topic}/dead-letters/purge", post(actions::purge))
        .route("/topics/{topic}/jobs/{id}/{verb}", post(actions::job))
        .route("/cron", get(pages::cron::show))
        .route("/groups", get(pages::groups::show))
        .route("/processes", get(pages::processes::show))
        .route("/health", get(pages::health::show))
        .route_layer(axum::middleware::from_fn_with_state(
            state.clone(),
            auth::require,
        ))
        .with_state(state)
}
