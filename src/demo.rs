//! `a2a-gateway demo` and `a2a-gateway sample-agent`.
pub async fn demo(_listen: String) -> Result<(), String> {
    Err("demo: not yet".into())
}
pub async fn sample_agent(_listen: String, _progress: bool) -> Result<(), String> {
    Err("sample-agent: not yet".into())
}
