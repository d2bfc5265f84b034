//! `ezmq dashboard`: serves [`ezmq::dashboard`] for the broker in `--url`
//! (or, without one, for a filled embedded server: see
//! [`super::dashboard_demo`]) until Ctrl-C.

use std::time::Duration;

use ezmq::dashboard::{self, DashboardOptions};
use ezmq::{Client, MqClient};

use crate::args::DashboardArgs;
use crate::exit::{CliError, CliResult};

/// Runs `ezmq dashboard` for `client`'s broker.
pub(crate) async fn run(client: &Client, args: DashboardArgs) -> CliResult<()> {
    serve(client, args, "").await
}

/// Runs `ezmq dashboard` without a URL: the demo.
pub(crate) async fn demo(args: DashboardArgs) -> CliResult<()> {
    let demo = super::dashboard_demo::start().await?;
    let note = format!(
        "demo data on an embedded server at disque://{} (pass --url for your broker); ",
        demo.server.addr()
    );
    let result = serve(&demo.client, args, &note).await;
    let _ = demo.client.shutdown(Duration::from_secs(5)).await;
    demo.server.shutdown().await;
    result
}

async fn serve(client: &Client, args: DashboardArgs, note: &str) -> CliResult<()> {
    let mut options = DashboardOptions::new().read_only(args.read_only);
    if let Some(credential) = &args.auth {
        options = options.with_basic_auth(&credential.user, &credential.password);
    }
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .map_err(|e| CliError::Usage(format!("cannot listen on {}: {e}", args.listen)))?;
    let addr = listener.local_addr()?;
    println!(
        "{note}dashboard on http://{addr}/{}{}; Ctrl-C to stop",
        if args.read_only { " (read-only)" } else { "" },
        if args.auth.is_some() {
            " (basic auth)"
        } else {
            ""
        },
    );
    let app = dashboard::router(client.clone(), options);
    dashboard::axum::serve(listener, app)
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await?;
    Ok(())
}
