//! From a [`Config`] to the backend to connect: the settings of code, the
//! URL's query string and the environment resolved into one backend
//! configuration, checked before anything connects.

use std::time::Duration;

use ezmq_core::spi::option_value::{self, split_query};
use ezmq_core::{Client, ClientConfig, Error, Result};

use crate::config::{Config, COMMON_OPTIONS};
use crate::connect::{bad_url, SCHEMES};

/// Every setting name an `EZMQ_*` variable can carry in this build.
pub(crate) fn every_option_name() -> Vec<&'static str> {
    let mut names = COMMON_OPTIONS.to_vec();
    #[cfg(feature = "disque")]
    names.extend_from_slice(ezmq_disque::DisqueConfig::OPTIONS);
    #[cfg(feature = "redis")]
    names.extend_from_slice(ezmq_redis::RedisConfig::OPTIONS);
    #[cfg(feature = "rabbitmq")]
    names.extend_from_slice(ezmq_rabbitmq::RabbitConfig::OPTIONS);
    #[cfg(feature = "postgres")]
    names.extend_from_slice(ezmq_postgres::PostgresConfig::OPTIONS);
    #[cfg(feature = "nats")]
    names.extend_from_slice(ezmq_nats::NatsConfig::OPTIONS);
    #[cfg(feature = "kafka")]
    names.extend_from_slice(ezmq_kafka::KafkaConfig::OPTIONS);
    names.sort_unstable();
    names.dedup();
    names
}

/// Where a setting came from, for errors.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Origin {
    Env,
    Url,
    Code,
}

/// One setting by name, in its text form.
struct Setting {
    name: String,
    text: String,
    origin: Origin,
}

/// What [`Config::connect`] connects, resolved.
pub(crate) struct Plan {
    /// How long to retry a retryable connection failure.
    pub(crate) connect_retry: Option<Duration>,
    client: ClientConfig,
    backend: BackendPlan,
}

/// One backend's configuration, resolved.
enum BackendPlan {
    #[cfg(feature = "disque")]
    Disque(ezmq_disque::DisqueConfig),
    #[cfg(feature = "redis")]
    Redis(ezmq_redis::RedisConfig),
    #[cfg(feature = "rabbitmq")]
    Rabbit(ezmq_rabbitmq::RabbitConfig),
    #[cfg(feature = "postgres")]
    Postgres(ezmq_postgres::PostgresConfig),
    #[cfg(feature = "nats")]
    Nats(ezmq_nats::NatsConfig),
    #[cfg(feature = "kafka")]
    Kafka(ezmq_kafka::KafkaConfig),
}

impl Plan {
    /// Resolves `config`: code over the URL's query over the environment.
    pub(crate) fn of(config: &Config) -> Result<Plan> {
        let url = config.url.trim();
        let Some((scheme, _)) = url.split_once("://") else {
            return Err(bad_url(url, "it has no scheme"));
        };
        let scheme = scheme.to_ascii_lowercase();
        let backend_names = backend_options(&scheme).ok_or_else(|| unknown_scheme(url, &scheme))?;
        let (base, query) = split_query(url)?;

        let mut settings: Vec<Setting> = config
            .env
            .iter()
            .filter(|(name, _)| {
                COMMON_OPTIONS.contains(&name.as_str()) || backend_names.contains(&name.as_str())
            })
            .map(|(name, text)| Setting {
                name: name.clone(),
                text: text.clone(),
                origin: Origin::Env,
            })
            .collect();
        settings.extend(query.into_iter().map(|(name, text)| Setting {
            name,
            text,
            origin: Origin::Url,
        }));
        let code = [
            ("prefix", config.prefix.clone()),
            ("timeout", config.timeout.map(option_value::duration_text)),
            (
                "connect_timeout",
                config.connect_timeout.map(option_value::duration_text),
            ),
        ];
        settings.extend(code.into_iter().filter_map(|(name, text)| {
            text.map(|text| Setting {
                name: name.to_owned(),
                text,
                origin: Origin::Code,
            })
        }));

        let mut client = ClientConfig::default();
        let mut connect_retry = None;
        let mut backend_settings = Vec::new();
        for setting in settings {
            match setting.name.as_str() {
                "max_payload" => {
                    client.max_payload_bytes = option_value::bytes("max_payload", &setting.text)
                        .map_err(|e| from(&setting, e))?;
                }
                "connect_retry" => {
                    connect_retry = Some(
                        option_value::duration("connect_retry", &setting.text)
                            .map_err(|e| from(&setting, e))?,
                    );
                }
                _ => backend_settings.push(setting),
            }
        }
        if let Some(max) = config.max_payload_bytes {
            client.max_payload_bytes = max;
        }
        if let Some(wait) = config.connect_retry {
            connect_retry = Some(wait);
        }
        let backend = BackendPlan::of(config, &scheme, base, backend_settings)?;
        Ok(Plan {
            connect_retry,
            client,
            backend,
        })
    }

    /// One connection attempt.
    pub(crate) async fn connect(&self) -> Result<Client> {
        let client = self.client.clone();
        match &self.backend {
            #[cfg(feature = "disque")]
            BackendPlan::Disque(config) => Ok(Client::new(
                ezmq_disque::DisqueBackend::connect(config.clone()).await?,
                client,
            )),
            #[cfg(feature = "redis")]
            BackendPlan::Redis(config) => Ok(Client::new(
                ezmq_redis::RedisBackend::connect(config.clone()).await?,
                client,
            )),
            #[cfg(feature = "rabbitmq")]
            BackendPlan::Rabbit(config) => Ok(Client::new(
                ezmq_rabbitmq::RabbitBackend::connect(config.clone()).await?,
                client,
            )),
            #[cfg(feature = "postgres")]
            BackendPlan::Postgres(config) => Ok(Client::new(
                ezmq_postgres::PostgresBackend::connect(config.clone()).await?,
                client,
            )),
            #[cfg(feature = "nats")]
            BackendPlan::Nats(config) => Ok(Client::new(
                ezmq_nats::NatsBackend::connect(config.clone()).await?,
                client,
            )),
            #[cfg(feature = "kafka")]
            BackendPlan::Kafka(config) => Ok(Client::new(
                ezmq_kafka::KafkaBackend::connect(config.clone()).await?,
                client,
            )),
        }
    }
}

impl BackendPlan {
    fn of(config: &Config, scheme: &str, base: &str, settings: Vec<Setting>) -> Result<Self> {
        // `config` is unused when no backend feature is on.
        let _ = (config, base, &settings);
        match scheme {
            #[cfg(feature = "disque")]
            "disque" => {
                let mut backend: ezmq_disque::DisqueConfig = base.parse()?;
                for s in &settings {
                    backend = backend
                        .with_option(&s.name, &s.text)
                        .map_err(|e| from(s, e))?;
                }
                if let Some(section) = &config.disque {
                    backend = section(backend);
                }
                Ok(BackendPlan::Disque(backend))
            }
            #[cfg(feature = "redis")]
            "redis" | "rediss" | "redis+cluster" => {
                let mut backend: ezmq_redis::RedisConfig = base.parse()?;
                for s in &settings {
                    backend = backend
                        .with_option(&s.name, &s.text)
                        .map_err(|e| from(s, e))?;
                }
                if let Some(section) = &config.redis {
                    backend = section(backend);
                }
                backend.validate()?;
                Ok(BackendPlan::Redis(backend))
            }
            #[cfg(feature = "rabbitmq")]
            "amqp" | "amqps" => {
                let mut backend: ezmq_rabbitmq::RabbitConfig = base.parse()?;
                for s in &settings {
                    backend = backend
                        .with_option(&s.name, &s.text)
                        .map_err(|e| from(s, e))?;
                }
                if let Some(section) = &config.rabbitmq {
                    backend = section(backend);
                }
                backend.validate()?;
                Ok(BackendPlan::Rabbit(backend))
            }
            #[cfg(feature = "postgres")]
            "postgres" | "postgresql" => {
                let mut backend: ezmq_postgres::PostgresConfig = base.parse()?;
                for s in &settings {
                    backend = backend
                        .with_option(&s.name, &s.text)
                        .map_err(|e| from(s, e))?;
                }
                if let Some(section) = &config.postgres {
                    backend = section(backend);
                }
                backend.validate()?;
                Ok(BackendPlan::Postgres(backend))
            }
            #[cfg(feature = "nats")]
            "nats" => {
                let mut backend: ezmq_nats::NatsConfig = base.parse()?;
                for s in &settings {
                    backend = backend
                        .with_option(&s.name, &s.text)
                        .map_err(|e| from(s, e))?;
                }
                if let Some(section) = &config.nats {
                    backend = section(backend);
                }
                backend.validate()?;
                Ok(BackendPlan::Nats(backend))
            }
            #[cfg(feature = "kafka")]
            "kafka" => {
                let mut backend: ezmq_kafka::KafkaConfig = base.parse()?;
                for s in &settings {
                    backend = backend
                        .with_option(&s.name, &s.text)
                        .map_err(|e| from(s, e))?;
                }
                if let Some(section) = &config.kafka {
                    backend = section(backend);
                }
                backend.validate()?;
                Ok(BackendPlan::Kafka(backend))
            }
            other => Err(unknown_scheme(&config.url, other)),
        }
    }
}

/// The setting names of the backend `scheme` picks, with the common ones
/// left to the facade; `None` for a scheme this build cannot connect.
fn backend_options(scheme: &str) -> Option<&'static [&'static str]> {
    match scheme {
        #[cfg(feature = "disque")]
        "disque" => Some(ezmq_disque::DisqueConfig::OPTIONS),
        #[cfg(feature = "redis")]
        "redis" | "rediss" | "redis+cluster" => Some(ezmq_redis::RedisConfig::OPTIONS),
        #[cfg(feature = "rabbitmq")]
        "amqp" | "amqps" => Some(ezmq_rabbitmq::RabbitConfig::OPTIONS),
        #[cfg(feature = "postgres")]
        "postgres" | "postgresql" => Some(ezmq_postgres::PostgresConfig::OPTIONS),
        #[cfg(feature = "nats")]
        "nats" => Some(ezmq_nats::NatsConfig::OPTIONS),
        #[cfg(feature = "kafka")]
        "kafka" => Some(ezmq_kafka::KafkaConfig::OPTIONS),
        _ => None,
    }
}

/// A setting's error, saying which variable it came from when it came from
/// the environment.
fn from(setting: &Setting, err: Error) -> Error {
    match (setting.origin, err) {
        (Origin::Env, Error::InvalidOption { option, reason }) => Error::InvalidOption {
            option,
            reason: format!("{}: {reason}", option_value::env_var(&setting.name)),
        },
        (_, err) => err,
    }
}

fn unknown_scheme(url: &str, scheme: &str) -> Error {
    match SCHEMES.iter().find(|(s, _, _)| *s == scheme) {
        Some((_, _, feature)) => bad_url(
            url,
            &format!("scheme `{scheme}` needs the `{feature}` feature of the ezmq crate"),
        ),
        None => bad_url(
            url,
            &format!(
                "unknown scheme `{scheme}`; use one of {}",
                SCHEMES
                    .iter()
                    .map(|(s, _, _)| format!("{s}://"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(config: Config) -> Result<Plan> {
        Plan::of(&config)
    }

    #[cfg(feature = "redis")]
    #[test]
    fn code_wins_over_the_url_which_wins_over_the_environment() {
        let mut config =
            Config::new("redis://127.0.0.1:6379/0?prefix=url&max_payload=2MiB&lease=9s");
        config.env = vec![
            ("prefix".into(), "env".into()),
            ("lease".into(), "5s".into()),
            ("block_wait".into(), "40ms".into()),
            ("prefetch".into(), "7".into()),
        ];
        let p = plan(config.clone()).unwrap();
        assert_eq!(p.client.max_payload_bytes, 2 << 20);
        let BackendPlan::Redis(redis) = &p.backend else {
            panic!("redis")
        };
        assert_eq!(redis.key_prefix, "url");
        assert_eq!(redis.lease, Duration::from_secs(9));
        assert_eq!(redis.block_wait, Duration::from_millis(40));
        assert_eq!(redis.urls, ["redis://127.0.0.1:6379/0"]);

        let p = plan(
            config
                .with_prefix("code")
                .with_max_payload_bytes(10)
                .with_redis(|r| r.with_lease(Duration::from_secs(1))),
        )
        .unwrap();
        assert_eq!(p.client.max_payload_bytes, 10);
        let BackendPlan::Redis(redis) = &p.backend else {
            panic!("redis")
        };
        assert_eq!(redis.key_prefix, "code");
        assert_eq!(redis.lease, Duration::from_secs(1));
    }

    #[cfg(feature = "redis")]
    #[test]
    fn bad_settings_name_themselves_and_their_source() {
        let err = plan(Config::new("redis://h?max_payload=huge"))
            .err()
            .unwrap();
        assert!(err.to_string().contains("`max_payload`"), "{err}");
        let err = plan(Config::new("redis://h?leese=1s")).err().unwrap();
        assert!(err.to_string().contains("unknown option `leese`"), "{err}");
        assert!(err.to_string().contains("lease"), "{err}");
        let mut config = Config::new("redis://h");
        config.env = vec![("lease".into(), "soon".into())];
        let err = plan(config).err().unwrap();
        assert!(err.to_string().contains("EZMQ_LEASE"), "{err}");
    }

    #[cfg(feature = "disque")]
    #[test]
    fn disque_refuses_a_prefix() {
        let err = plan(Config::new("disque://127.0.0.1:7711?prefix=app"))
            .err()
            .unwrap();
        assert!(err.to_string().contains("no name prefix"), "{err}");
        let p = plan(Config::new(
            "disque://127.0.0.1:7711?replicate=1&max_payload=64KiB",
        ))
        .unwrap();
        assert_eq!(p.client.max_payload_bytes, 64 << 10);
    }

    /// `docs/configuration.md` is the one table of settings: every name
    /// this build takes is in it.
    #[test]
    fn the_configuration_table_lists_every_setting() {
        let doc = include_str!("../docs/configuration.md");
        for name in every_option_name() {
            assert!(
                doc.contains(&format!("| `{name}` |")),
                "docs/configuration.md has no row for `{name}`"
            );
        }
    }

    #[test]
    fn unknown_schemes_are_named() {
        let err = plan(Config::new("mqtt://broker:1883")).err().unwrap();
        assert!(err.to_string().contains("unknown scheme `mqtt`"), "{err}");
    }

    #[cfg(not(feature = "kafka"))]
    #[test]
    fn a_scheme_whose_feature_is_off_names_the_feature() {
        let err = plan(Config::new("kafka://broker:9092")).err().unwrap();
        assert!(
            err.to_string().contains("needs the `kafka` feature"),
            "{err}"
        );
    }
}
