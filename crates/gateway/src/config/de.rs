//! serde helpers for the config's fields: durations from whole units, and values parsed from
//! strings. Their messages never repeat a value that may be a credential.

use std::time::Duration;

use hyper::header::HeaderName;
use serde::de::Error;
use serde::{Deserialize, Deserializer};

use super::{Right, Secret};

pub fn millis<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    u64::deserialize(d).map(Duration::from_millis)
}

pub fn secs<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    u64::deserialize(d).map(Duration::from_secs)
}

/// A base URL is kept without its trailing slash.
pub fn base_url<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    String::deserialize(d).map(|u| u.trim_end_matches('/').to_owned())
}

/// An optional base URL, kept without its trailing slash.
pub fn opt_base_url<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    Option::<String>::deserialize(d).map(|u| u.map(|u| u.trim_end_matches('/').to_owned()))
}

pub fn header_line<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<Option<(HeaderName, Secret)>, D::Error> {
    let line = Secret::deserialize(d)?;
    super::parse_header_line(line.expose())
        .map(Some)
        .ok_or_else(|| {
            D::Error::custom("must be one header line such as \"Authorization: Bearer <token>\"")
        })
}

/// One value or a list of them (`secret = "whsec_..."` or `secret = ["whsec_new", "whsec_old"]`).
pub fn one_or_many<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<Secret>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum OneOrMany {
        One(Secret),
        Many(Vec<Secret>),
    }
    Ok(match OneOrMany::deserialize(d) {
        Ok(OneOrMany::One(s)) => vec![s],
        Ok(OneOrMany::Many(v)) => v,
        Err(_) => return Err(D::Error::custom("must be a signing key or a list of them")),
    })
}

/// `can`: a list of rights. Every unknown value is named in one message (serde's own would
/// stop at the first), with the values it may be.
pub fn rights<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<Right>, D::Error> {
    let names = Vec::<String>::deserialize(d)?;
    let mut rights = Vec::with_capacity(names.len());
    let mut unknown = Vec::new();
    for name in &names {
        match Right::ALL.iter().find(|r| r.as_str() == name) {
            Some(r) => rights.push(*r),
            None => unknown.push(format!("{name:?}")),
        }
    }
    if unknown.is_empty() {
        return Ok(rights);
    }
    let known: Vec<&str> = Right::ALL.iter().map(|r| r.as_str()).collect();
    Err(D::Error::custom(format!(
        "unknown right{} {}: each must be one of {}",
        if unknown.len() == 1 { "" } else { "s" },
        unknown.join(", "),
        known.join(", ")
    )))
}
