//! serde helpers for the config's fields: durations from whole units, and values parsed from
//! strings. Their messages never repeat a value that may be a credential.

use std::collections::BTreeMap;
use std::time::Duration;

use hyper::header::HeaderName;
use serde::de::Error;
use serde::{Deserialize, Deserializer};

use super::identity::A2A_METHODS;
use super::{Right, ScopeRights, Secret};

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
    let known: Vec<&str> = Right::ALL.iter().map(|r| r.as_str()).collect();
    check_names(&names, &known, "right", "").map_err(D::Error::custom)?;
    Ok(names
        .iter()
        .filter_map(|n| Right::ALL.into_iter().find(|r| r.as_str() == n))
        .collect())
}

/// `methods`: a list of official A2A methods, by the 1.0 proto's names. Every unknown value is
/// named in one message, with the names there are, as for `can`.
pub fn methods<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    let names = Vec::<String>::deserialize(d)?;
    check_names(
        &names,
        &A2A_METHODS,
        "A2A method",
        " (the 1.0 proto's names; a 0.3 call such as message/send counts as its 1.0 method)",
    )
    .map_err(D::Error::custom)?;
    Ok(names)
}

/// `[[auth.oidc]] scopes`: a table from a scope to what it grants, each entry read as
/// [`ScopeRights`]; a refused entry's message names its scope (a scope holds `.` and `/`,
/// which a config key path cannot: the problem's key is the table's).
pub fn scopes<'de, D: Deserializer<'de>>(d: D) -> Result<BTreeMap<String, ScopeRights>, D::Error> {
    struct Table;

    impl<'de> serde::de::Visitor<'de> for Table {
        type Value = BTreeMap<String, ScopeRights>;

        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a table from a scope to { can, methods, agents }")
        }

        fn visit_map<A: serde::de::MapAccess<'de>>(
            self,
            mut map: A,
        ) -> Result<Self::Value, A::Error> {
            let mut out = BTreeMap::new();
            while let Some(scope) = map.next_key::<String>()? {
                let rights = map
                    .next_value::<ScopeRights>()
                    .map_err(|e| A::Error::custom(format!("scope {scope:?}: {e}")))?;
                out.insert(scope, rights);
            }
            Ok(out)
        }
    }

    d.deserialize_map(Table)
}

/// `Ok` when every one of `names` is one of `known`; else one message naming every unknown
/// one (a `what`, plural when several) and what they may be, then `hint`.
fn check_names(names: &[String], known: &[&str], what: &str, hint: &str) -> Result<(), String> {
    let unknown: Vec<String> = names
        .iter()
        .filter(|n| !known.contains(&n.as_str()))
        .map(|n| format!("{n:?}"))
        .collect();
    if unknown.is_empty() {
        return Ok(());
    }
    Err(format!(
        "unknown {what}{} {}: each must be one of {}{hint}",
        if unknown.len() == 1 { "" } else { "s" },
        unknown.join(", "),
        known.join(", ")
    ))
}

/// A list of base URLs, each kept without its trailing slash.
pub fn base_urls<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    Vec::<String>::deserialize(d).map(|v| {
        v.into_iter()
            .map(|u| u.trim_end_matches('/').to_owned())
            .collect()
    })
}
