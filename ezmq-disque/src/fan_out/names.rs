//! The internal queue names of the fan-out: one queue per group, one
//! registry per broadcast topic.

use ezmq_core::{Error, Result, Topic};

/// Kind of the per-group message queues: `__ezmq|bc|<topic>|<group>`.
const GROUP_KIND: &str = "bc";

/// Kind of the membership registries: `__ezmq|bcg|<topic>`.
const REGISTRY_KIND: &str = "bcg";

/// The queue the members of `group` consume broadcasts of `topic` from:
/// `__ezmq|bc|<topic>|<group>`. Fails (as an invalid `group` option) when
/// the combination is too long.
pub(crate) fn group_queue(topic: &Topic, group: &Topic) -> Result<Topic> {
    Topic::internal(GROUP_KIND, &[topic.as_str(), group.as_str()]).map_err(|err| match err {
        Error::InvalidTopic { reason, .. } => Error::invalid_option(
            "group",
            format!("topic {topic:?} with group {group:?}: {reason}"),
        ),
        other => other,
    })
}

/// The registry queue holding the membership announcements of `topic`:
/// `__ezmq|bcg|<topic>`.
pub(crate) fn registry(topic: &Topic) -> Result<Topic> {
    Topic::internal(REGISTRY_KIND, &[topic.as_str()])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(name: &str) -> Topic {
        Topic::new(name).unwrap()
    }

    #[test]
    fn builds_distinct_internal_names() {
        let q = group_queue(&t("orders"), &t("billing")).unwrap();
        assert_eq!(q.as_str(), "__ezmq|bc|orders|billing");
        assert_eq!(
            registry(&t("orders")).unwrap().as_str(),
            "__ezmq|bcg|orders"
        );
        let a = group_queue(&t("a.b"), &t("c")).unwrap();
        let b = group_queue(&t("a"), &t("b.c")).unwrap();
        assert_ne!(a, b);
    }

    #[test]
    fn too_long_combinations_are_group_errors() {
        let err = group_queue(&t(&"t".repeat(200)), &t(&"g".repeat(200))).unwrap_err();
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
