//! Validation of topic and group names and the internal queue names built
//! from them.

use ezmq_core::{Error, Result, Topic};

/// Kind of the per-group message queues: `__ezmq|bc|<topic>|<group>`.
const GROUP_KIND: &str = "bc";

/// Kind of the membership registries: `__ezmq|bcg|<topic>`.
const REGISTRY_KIND: &str = "bcg";

/// Validates a broadcast topic (the user-topic rules of [`Topic::new`]).
pub(crate) fn topic(name: &str) -> Result<Topic> {
    Topic::new(name)
}

/// Validates a consumer-group name: the same alphabet and length rules as a
/// user topic, reported as an invalid `group` option.
pub(crate) fn check_group(group: &str) -> Result<()> {
    match Topic::new(group) {
        Ok(_) => Ok(()),
        Err(Error::InvalidTopic { reason, .. }) => Err(Error::invalid_option(
            "group",
            format!("invalid group name {group:?}: {reason}"),
        )),
        Err(other) => Err(other),
    }
}

/// The queue the members of `group` consume broadcasts of `topic` from.
/// `topic` is validated; `group` must have passed [`check_group`].
pub(crate) fn group_queue(topic: &Topic, group: &str) -> Result<Topic> {
    Topic::internal(GROUP_KIND, &[topic.as_str(), group]).map_err(|err| match err {
        Error::InvalidTopic { reason, .. } => Error::invalid_option(
            "group",
            format!("topic {topic:?} with group {group:?}: {reason}"),
        ),
        other => other,
    })
}

/// The registry queue holding the membership announcements of `topic`.
pub(crate) fn registry(topic: &Topic) -> Result<Topic> {
    Topic::internal(REGISTRY_KIND, &[topic.as_str()])
}

/// Validates a topic and a group and builds the group's queue name.
pub(crate) fn topic_and_group(topic_name: &str, group: &str) -> Result<(Topic, Topic)> {
    let topic = topic(topic_name)?;
    check_group(group)?;
    let queue = group_queue(&topic, group)?;
    Ok((topic, queue))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builds_distinct_internal_names() {
        let (t, q) = topic_and_group("orders", "billing").unwrap();
        assert_eq!(q.as_str(), "__ezmq|bc|orders|billing");
        assert_eq!(registry(&t).unwrap().as_str(), "__ezmq|bcg|orders");
        let (_, a) = topic_and_group("a.b", "c").unwrap();
        let (_, b) = topic_and_group("a", "b.c").unwrap();
        assert_ne!(a, b);
    }

    #[test]
    fn rejects_bad_groups_as_group_errors() {
        for bad in ["", "has space", "a|b", "é", "__ezmq.x"] {
            let err = topic_and_group("orders", bad).unwrap_err();
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
        let err = topic_and_group("orders", &"g".repeat(201)).unwrap_err();
        assert!(err.to_string().contains("group"), "{err}");
    }

    #[test]
    fn rejects_bad_topics() {
        for bad in ["", "has space", "a|b", "__ezmq|bc|x"] {
            let err = topic_and_group(bad, "g").unwrap_err();
            assert!(matches!(err, Error::InvalidTopic { .. }), "{bad:?}: {err}");
        }
    }

    #[test]
    fn rejects_too_long_combinations() {
        let err = topic_and_group(&"t".repeat(200), &"g".repeat(200)).unwrap_err();
        assert!(
            matches!(
                err,
                Error::InvalidOption {
                    option: "group",
                    ..
                }
            ),
            "{err}"
        );
    }
}
