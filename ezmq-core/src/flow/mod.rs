//! Flow control that core builds from the SPI for backends without a
//! primitive of their own: today the cluster-wide rate limiter on
//! [`ExclusiveClaim`](crate::spi::ExclusiveClaim) ([`claim_rate`]).

pub(crate) mod claim_rate;
