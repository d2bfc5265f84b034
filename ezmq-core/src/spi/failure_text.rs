//! How a handler's failure is written down (dead letters, remote errors):
//! an error with its causes, or a panic's message.

use std::any::Any;

/// `err` and its causes, `: `-separated; a cause whose text the message
/// already holds (errors that print their cause) is not repeated.
///
/// ```
/// use ezmq_core::spi::error_chain;
///
/// #[derive(Debug, thiserror::Error)]
/// #[error("charge failed")]
/// struct Charge(#[source] std::io::Error);
///
/// let err = Charge(std::io::Error::other("card declined"));
/// assert_eq!(error_chain(&err), "charge failed: card declined");
/// ```
pub fn error_chain(err: &(dyn std::error::Error + 'static)) -> String {
    let mut message = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        let text = cause.to_string();
        if !message.contains(&text) {
            message.push_str(": ");
            message.push_str(&text);
        }
        source = cause.source();
    }
    message
}

/// The message of a caught panic's payload (`panic!("...")` with a literal
/// or a formatted string), or a placeholder for any other payload.
///
/// ```
/// use ezmq_core::spi::panic_message;
///
/// let caught = std::panic::catch_unwind(|| panic!("no stock for {}", "A1")).unwrap_err();
/// assert_eq!(panic_message(caught.as_ref()), "no stock for A1");
/// ```
pub fn panic_message(panic: &(dyn Any + Send)) -> &str {
    if let Some(s) = panic.downcast_ref::<&'static str>() {
        s
    } else if let Some(s) = panic.downcast_ref::<String>() {
        s
    } else {
        "non-string panic payload"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("outer")]
    struct Outer(#[source] std::io::Error);

    #[derive(Debug, thiserror::Error)]
    #[error("outer: {0}")]
    struct Printing(#[source] std::io::Error);

    #[test]
    fn causes_are_listed_once() {
        assert_eq!(
            error_chain(&Outer(std::io::Error::other("inner"))),
            "outer: inner"
        );
        assert_eq!(
            error_chain(&Printing(std::io::Error::other("inner"))),
            "outer: inner"
        );
    }

    #[test]
    fn panics_of_every_payload() {
        assert_eq!(panic_message(&"literal"), "literal");
        assert_eq!(panic_message(&String::from("formatted")), "formatted");
        assert_eq!(panic_message(&42_u32), "non-string panic payload");
    }
}
