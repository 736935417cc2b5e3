//! `a2a-gateway probe URL`: a health check for images without curl (the Dockerfile's
//! HEALTHCHECK, compose's healthcheck). It uses the gateway's own client towards agents, so an
//! `https://` URL is checked against the system roots plus `--ca-file`, as an agent would be.

use std::process::ExitCode;
use std::time::Duration;

use a2a_gateway::config::AgentConfig;
use a2a_gateway::upstream::Upstream;
use bytes::Bytes;
use http_body_util::Full;
use hyper::{Method, Request};

/// Exit 0 if `url` answers 2xx within `timeout`; 1 otherwise (an error status, no answer, a
/// URL that is not http(s)), with one line on stderr saying why.
pub fn probe(url: &str, timeout: Duration, ca_file: Option<String>) -> ExitCode {
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("probe: cannot start a runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match rt.block_on(ask(url, timeout, ca_file)) {
        Ok(status) if (200..300).contains(&status) => {
            println!("{url}: {status}");
            ExitCode::SUCCESS
        }
        Ok(status) => {
            eprintln!("{url}: {status}");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("{url}: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn ask(url: &str, timeout: Duration, ca_file: Option<String>) -> Result<u16, String> {
    let uri: hyper::Uri = url.parse().map_err(|e| format!("not a URL: {e}"))?;
    if !matches!(uri.scheme_str(), Some("http" | "https")) || uri.host().is_none() {
        return Err("not an http:// or https:// URL".into());
    }
    let origin = format!(
        "{}://{}",
        uri.scheme_str().unwrap_or("http"),
        uri.authority().map_or("", |a| a.as_str())
    );
    let mut target = AgentConfig::new("probe", &origin);
    target.ca_file = ca_file;
    let upstream = Upstream::new(timeout, &[target]).map_err(|e| e.to_string())?;
    let req = Request::builder()
        .method(Method::GET)
        .uri(uri)
        .header(hyper::header::USER_AGENT, "a2a-gateway-probe")
        .body(Full::new(Bytes::new()))
        .map_err(|e| e.to_string())?;
    let res = upstream
        .send(req, timeout)
        .await
        .map_err(|e| e.to_string())?;
    Ok(res.status().as_u16())
}
