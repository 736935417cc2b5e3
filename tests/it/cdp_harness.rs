//! The CDP harness against a page of its own, so that a browser test failing later can be told
//! apart from a harness that does not work: the page changes its DOM 200 ms after loading, and
//! the harness must wait for it, evaluate, report a throw, and take a real screenshot.

use std::time::Duration;

use base64::Engine;
use serde_json::json;

use crate::support::cdp::Browser;

/// The page: "waiting", then "ready" (with the class `done`) after a 200 ms timer. The gradient
/// gives the screenshot content that a PNG cannot compress to almost nothing.
const PAGE: &str = r#"<!doctype html><html><head><meta charset="utf-8"><title>cdp</title>
<style>body { margin: 0; height: 100vh; background: linear-gradient(135deg, #0b3d91, #f5a623); }
h1 { font: 48px sans-serif; color: white; padding: 40px; }</style></head>
<body><h1 id="status">waiting</h1>
<script>setTimeout(() => {
  const h = document.getElementById("status");
  h.textContent = "ready";
  h.className = "done";
}, 200);</script></body></html>"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_harness_navigates_waits_evaluates_and_takes_screenshots() {
    let mut browser = Browser::launch(800, 600).await;
    // A data: URL needs no server; base64 spares escaping the HTML into a URL.
    let url = format!(
        "data:text/html;base64,{}",
        base64::engine::general_purpose::STANDARD.encode(PAGE)
    );
    browser.navigate(&url).await;
    assert_eq!(browser.eval("document.title").await, "cdp");

    let text = browser
        .wait_for(
            "the timer's update",
            "document.querySelector('#status.done')?.textContent",
            Duration::from_secs(10),
        )
        .await;
    assert_eq!(text, "ready");

    assert_eq!(browser.eval("6 * 7").await, 42);
    let later = "new Promise(resolve => setTimeout(() => resolve({ n: 1 }), 20))";
    assert_eq!(browser.eval(later).await, json!({ "n": 1 }));
    let thrown = browser
        .try_eval("throw new Error('boom')")
        .await
        .expect_err("a throw is an error");
    assert!(thrown.starts_with("Error: boom"), "{thrown}");
    let err = browser
        .send("No.suchMethod", json!({}))
        .await
        .expect_err("an unknown method is a CDP error");
    assert!(err.contains("No.suchMethod"), "{err}");

    let dir = tempfile::tempdir().expect("screenshot dir");
    let path = dir.path().join("shots").join("page.png");
    browser.screenshot(&path).await;
    let png = std::fs::read(&path).expect("the screenshot was written");
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "not a PNG");
    assert!(png.len() > 1024, "a {}-byte screenshot", png.len());
}
