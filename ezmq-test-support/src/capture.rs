//! Capturing every `tracing` event and span at TRACE, as text, for tests
//! that a secret never shows in the logs.

use std::fmt::{self, Write as _};
use std::sync::{Arc, Mutex, PoisonError};

use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::subscriber::DefaultGuard;
use tracing::{Event, Subscriber};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};

/// Records every event and every span's fields (at creation and when
/// recorded later), one line each: `event <target> name=value…`,
/// `span <name> name=value…`, `span record name=value…`. Values are
/// written with `Debug`; errors with `Display` and `Debug` of their whole
/// source chain. Nothing is filtered out: TRACE and every target.
///
/// Install it as the thread's default ([`LogCapture::set_default`], which
/// sees every task on a `current_thread` runtime) or as the global
/// subscriber of a test binary holding one test
/// ([`LogCapture::install_global`]).
///
/// ```
/// use ezmq_test_support::{assert_hidden, LogCapture};
///
/// let logs = LogCapture::new();
/// let _default = logs.set_default();
/// tracing::info!(url = "redis://:***@host", "connected");
/// assert!(logs.text().contains("connected"));
/// assert_hidden("the log", &logs.text(), &["s3cr3t"]);
/// ```
#[derive(Clone, Default)]
pub struct LogCapture {
    lines: Arc<Mutex<Vec<String>>>,
}

impl fmt::Debug for LogCapture {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LogCapture")
            .field("lines", &self.lines().len())
            .finish()
    }
}

impl LogCapture {
    /// An empty capture, not installed yet.
    pub fn new() -> LogCapture {
        LogCapture::default()
    }

    /// A subscriber that records into this capture.
    pub fn subscriber(&self) -> impl Subscriber + Send + Sync + 'static {
        tracing_subscriber::registry().with(self.clone())
    }

    /// Makes this capture the current thread's default subscriber until
    /// the guard is dropped.
    pub fn set_default(&self) -> DefaultGuard {
        tracing::subscriber::set_default(self.subscriber())
    }

    /// Makes this capture the current thread's default subscriber, as
    /// [`LogCapture::set_default`], but seeing only events and spans at
    /// `level` or more severe, as `RUST_LOG=warn` would: an event then
    /// carries no field of the INFO spans it happened in.
    pub fn set_default_at(&self, level: tracing::Level) -> DefaultGuard {
        use tracing_subscriber::filter::LevelFilter;
        let subscriber = tracing_subscriber::registry()
            .with(self.clone().with_filter(LevelFilter::from_level(level)));
        tracing::subscriber::set_default(subscriber)
    }

    /// Makes this capture the global subscriber. Panics when one is set
    /// already: the test binary must hold this one test.
    pub fn install_global(&self) {
        tracing::subscriber::set_global_default(self.subscriber())
            .expect("the only subscriber of this test binary");
    }

    /// Every line recorded so far.
    pub fn lines(&self) -> Vec<String> {
        self.lock().clone()
    }

    /// Every line recorded so far, joined by newlines.
    pub fn text(&self) -> String {
        self.lock().join("\n")
    }

    fn push(&self, line: String) {
        self.lock().push(line);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<String>> {
        self.lines.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Writes ` name=value` for each field; errors with their whole chain.
struct Fields(String);

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        let _ = write!(self.0, " {}={:?}", field.name(), value);
    }

    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        let _ = write!(self.0, " {}={value} / {value:?}", field.name());
        let mut source = value.source();
        while let Some(cause) = source {
            let _ = write!(self.0, ": {cause} / {cause:?}");
            source = cause.source();
        }
    }
}

impl<S: Subscriber> Layer<S> for LogCapture {
    fn on_event(&self, event: &Event<'_>, _: Context<'_, S>) {
        let mut fields = Fields(format!("event {}", event.metadata().target()));
        event.record(&mut fields);
        self.push(fields.0);
    }

    fn on_new_span(&self, attrs: &Attributes<'_>, _: &Id, _: Context<'_, S>) {
        let mut fields = Fields(format!("span {}", attrs.metadata().name()));
        attrs.record(&mut fields);
        self.push(fields.0);
    }

    fn on_record(&self, _: &Id, values: &Record<'_>, _: Context<'_, S>) {
        let mut fields = Fields("span record".to_owned());
        values.record(&mut fields);
        self.push(fields.0);
    }
}

/// Panics, naming `what` and showing `text`, when `text` contains any of
/// `secrets`.
pub fn assert_hidden(what: &str, text: &str, secrets: &[&str]) {
    for secret in secrets {
        assert!(!text.contains(secret), "{what} shows a password: {text}");
    }
}
