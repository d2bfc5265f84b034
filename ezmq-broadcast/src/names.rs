//! Validation of broadcast topic and group names.

use ezmq_core::{Error, Result, Topic};

/// Validates a broadcast topic (the user-topic rules of [`Topic::new`]).
pub(crate) fn topic(name: &str) -> Result<Topic> {
    Topic::new(name)
}

/// Validates a consumer-group name: the same alphabet and length rules as a
/// user topic, reported as an invalid `group` option.
pub(crate) fn group(name: &str) -> Result<Topic> {
    Topic::new(name).map_err(|err| match err {
        Error::InvalidTopic { reason, .. } => {
            Error::invalid_option("group", format!("invalid group name {name:?}: {reason}"))
        }
        other => other,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_bad_groups_as_group_errors() {
        for bad in ["", "has space", "a|b", "é", "__ezmq.x"] {
            let err = group(bad).unwrap_err();
            assert!(
                matches!(
                    err,
                    Error::InvalidOption {
                        option: "group",
                        ..
                    }
                ),
                "{bad:?}: {err}"
            );
        }
        let err = group(&"g".repeat(201)).unwrap_err();
        assert!(err.to_string().contains("group"), "{err}");
        assert_eq!(group("billing").unwrap().as_str(), "billing");
    }

    #[test]
    fn rejects_bad_topics() {
        for bad in ["", "has space", "a|b", "__ezmq|bc|x"] {
            let err = topic(bad).unwrap_err();
            assert!(matches!(err, Error::InvalidTopic { .. }), "{bad:?}: {err}");
        }
    }
}
