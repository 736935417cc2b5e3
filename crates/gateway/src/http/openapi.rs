//! The OpenAPI 3.1 document of the gateway's own API: every route of [`super::route`] with its
//! requests, answers, error codes (`{"error":{"code","message","details"}}`), the headers that
//! matter and the security schemes of the edge. It lives beside this file as `openapi.json`
//! (hand-maintained JSON), is compiled into the binary and served at `GET /openapi.json`.
//!
//! The tests below keep it honest: every documented path is a route with the documented method,
//! every route is documented (`Route::template` has no wildcard arm, and every path the router
//! accepts has a template in `route::TEMPLATES`), every path parameter is declared, and every
//! error code is in the document under the status its [`Code`](super::error::Code) decides.
//! `tests/it/openapi.rs` checks the served document against a live gateway, and
//! `tests/schemathesis/run.sh` checks the answers of a live gateway against the document.

/// The document, as served.
pub const DOCUMENT: &[u8] = include_bytes!("openapi.json");

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};

    use serde_json::Value;

    use super::DOCUMENT;
    use crate::http::error::{Code, FALLBACK_BODY};
    use crate::http::route::{
        instantiate, instantiate_a2a, Route, A2A_TEMPLATES, A2A_TEST_AGENT, TEMPLATES,
    };

    const METHODS: [&str; 8] = [
        "get", "put", "post", "delete", "options", "head", "patch", "trace",
    ];

    fn doc() -> Value {
        serde_json::from_slice(DOCUMENT).expect("openapi.json is JSON")
    }

    /// `#/components/...` resolved against the document.
    fn resolve<'a>(doc: &'a Value, v: &'a Value) -> &'a Value {
        match v.get("$ref").and_then(Value::as_str) {
            Some(r) => doc
                .pointer(r.strip_prefix('#').expect("a local $ref"))
                .unwrap_or_else(|| panic!("$ref {r} resolves")),
            None => v,
        }
    }

    fn operations(doc: &Value) -> Vec<(String, String, &Value)> {
        let paths = doc["paths"].as_object().expect("paths");
        let mut out = Vec::new();
        for (path, item) in paths {
            for (method, op) in item.as_object().expect("path item") {
                if METHODS.contains(&method.as_str()) {
                    out.push((path.clone(), method.clone(), op));
                }
            }
        }
        out
    }

    #[test]
    fn the_document_is_openapi_3_1() {
        let d = doc();
        assert!(d["openapi"].as_str().is_some_and(|v| v.starts_with("3.1.")));
        assert!(d["info"]["title"].is_string() && d["info"]["version"].is_string());
    }

    /// The methods the router serves at each template: a gateway or Clawpedia route's one
    /// method (filled in, parsed, its `meta`), and an official A2A agent's (filled in with an
    /// A2A agent's name, parsed as that agent's, in [`A2A_TEMPLATES`]).
    fn routed_methods() -> BTreeMap<&'static str, BTreeSet<String>> {
        let mut out: BTreeMap<&'static str, BTreeSet<String>> = BTreeMap::new();
        for template in TEMPLATES {
            let path = instantiate(template);
            assert_eq!(Route::parse(&path).template(), Some(template), "{path}");
            // Each method that chooses a route of this template taking that method (`/tasks`:
            // GET lists, POST creates).
            for method in [hyper::Method::GET, hyper::Method::POST] {
                let route = Route::parse(&path).with_method(&method);
                if route.template() == Some(template) && route.meta().1 == method {
                    out.entry(template)
                        .or_default()
                        .insert(method.as_str().to_ascii_lowercase());
                }
            }
        }
        for (template, methods) in A2A_TEMPLATES {
            let path = instantiate_a2a(template);
            let route = Route::parse_with(&path, |n| n == A2A_TEST_AGENT);
            assert!(route.is_a2a(), "{path}");
            assert_eq!(route.template(), Some(template), "{path}");
            out.entry(template)
                .or_default()
                .extend(methods.iter().map(|m| m.to_ascii_lowercase()));
        }
        out
    }

    /// Each documented path, filled in, is parsed by the router to the route of that template,
    /// and documents exactly the methods the router serves there (two on the A2A push-config
    /// paths).
    #[test]
    fn every_documented_path_is_a_route_with_its_methods() {
        let d = doc();
        let paths = d["paths"].as_object().expect("paths");
        assert!(!paths.is_empty());
        let routed = routed_methods();
        for (template, item) in paths {
            let a2a = A2A_TEMPLATES.iter().any(|(t, _)| t == template);
            let filled = if a2a {
                instantiate_a2a(template)
            } else {
                instantiate(template)
            };
            assert!(
                !filled.contains('{'),
                "{template}: a parameter the router test cannot fill"
            );
            let methods: BTreeSet<String> = item
                .as_object()
                .expect("path item")
                .keys()
                .filter(|k| METHODS.contains(&k.as_str()))
                .cloned()
                .collect();
            assert_eq!(Some(&methods), routed.get(template.as_str()), "{template}");
        }
        let configs = &routed["/agents/{name}/tasks/{task_id}/pushNotificationConfigs"];
        assert!(
            configs.contains("get") && configs.contains("post"),
            "{configs:?}"
        );
    }

    /// Both ways: the router's templates are the document's paths, no more, no fewer.
    #[test]
    fn every_route_is_documented() {
        let d = doc();
        let documented: BTreeSet<&str> = d["paths"]
            .as_object()
            .expect("paths")
            .keys()
            .map(String::as_str)
            .collect();
        let routed: BTreeSet<&str> = TEMPLATES.iter().copied().collect();
        assert_eq!(routed.len(), TEMPLATES.len(), "a template listed twice");
        let a2a: BTreeSet<&str> = A2A_TEMPLATES.iter().map(|(t, _)| *t).collect();
        assert_eq!(
            a2a.len(),
            A2A_TEMPLATES.len(),
            "an A2A template listed twice"
        );
        let all: BTreeSet<&str> = routed.union(&a2a).copied().collect();
        assert_eq!(documented, all);
    }

    /// Every path the router accepts has a template in `TEMPLATES`, and that template, filled
    /// in, routes to the same kind of route. The paths tried are every sequence of up to five
    /// segments (the longest route has five) made of the literal segments `Route::parse`
    /// matches on, read from its source so that a new literal is tried too, and a parameter.
    #[test]
    fn every_routed_path_has_a_listed_template() {
        let source = include_str!("route.rs");
        let parsing = &source[source.find("pub fn parse(").expect("parse")
            ..source.find("pub fn is_local(").expect("is_local")];
        let mut vocab: BTreeSet<&str> = BTreeSet::new();
        for piece in parsing.split("Some(\"").skip(1) {
            if let Some(end) = piece.find("\")") {
                vocab.insert(&piece[..end]);
            }
        }
        assert!(vocab.contains("openapi.json") && vocab.contains("cancel"));
        vocab.insert("x1");
        let vocab: Vec<&str> = vocab.into_iter().collect();
        let mut seen = BTreeSet::new();
        let mut path = String::with_capacity(64);
        let mut tried = 0usize;
        for len in 1..=5u32 {
            let n = vocab.len().pow(len);
            for mut i in 0..n {
                path.clear();
                for _ in 0..len {
                    path.push('/');
                    path.push_str(vocab[i % vocab.len()]);
                    i /= vocab.len();
                }
                tried += 1;
                let route = Route::parse(&path);
                if route == Route::NotFound {
                    continue;
                }
                let template = route
                    .template()
                    .unwrap_or_else(|| panic!("{path} routes without a template"));
                assert!(
                    TEMPLATES.contains(&template),
                    "{path}: {template} not listed"
                );
                let again = instantiate(template);
                assert_eq!(
                    std::mem::discriminant(&Route::parse(&again)),
                    std::mem::discriminant(&route),
                    "{path} and {again}"
                );
                seen.insert(template);
            }
        }
        assert!(tried > 1_000_000);
        assert_eq!(seen.len(), TEMPLATES.len(), "templates no path reached");
    }

    /// Each `{parameter}` of a path is declared `in: path` by its operation, and nothing else is.
    #[test]
    fn path_parameters_are_declared() {
        let d = doc();
        for (template, method, op) in operations(&d) {
            let placeholders: BTreeSet<&str> = template
                .split('{')
                .skip(1)
                .filter_map(|p| p.split_once('}').map(|(name, _)| name))
                .collect();
            let declared: BTreeSet<&str> = op["parameters"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|p| resolve(&d, p))
                .filter(|p| p["in"] == "path")
                .inspect(|p| assert_eq!(p["required"], true, "{method} {template}"))
                .filter_map(|p| p["name"].as_str())
                .collect();
            assert_eq!(placeholders, declared, "{method} {template}");
        }
    }

    /// The document's `ErrorCode` is every `Code` (and the fallback body's), and wherever an
    /// answer narrows the code, each code listed is one whose status is that answer's.
    #[test]
    fn error_codes_match_their_statuses() {
        let source = include_str!("error.rs");
        let as_str = &source[source.find("pub fn as_str(self)").expect("as_str")
            ..source.find("pub fn status(self)").expect("status")];
        assert_eq!(
            as_str.matches("=> \"").count(),
            Code::ALL.len(),
            "Code::ALL misses a code"
        );
        let d = doc();
        let fallback: Value = serde_json::from_slice(FALLBACK_BODY).expect("fallback body");
        let mut want: BTreeSet<&str> = Code::ALL.iter().map(|c| c.as_str()).collect();
        want.insert(fallback["error"]["code"].as_str().expect("fallback code"));
        let documented: BTreeSet<&str> = d["components"]["schemas"]["ErrorCode"]["enum"]
            .as_array()
            .expect("ErrorCode enum")
            .iter()
            .filter_map(Value::as_str)
            .collect();
        assert_eq!(documented, want);
        let status_of: BTreeMap<&str, u16> = Code::ALL
            .iter()
            .map(|c| (c.as_str(), c.status().as_u16()))
            .collect();
        let mut answered = BTreeSet::new();
        for (template, method, op) in operations(&d) {
            for (status, r) in op["responses"].as_object().expect("responses") {
                let r = resolve(&d, r);
                let schema = &r["content"]["application/json"]["schema"];
                // The gateway's narrowed Error, alone or beside an A2A shape (`anyOf`).
                let narrowed = schema["anyOf"]
                    .as_array()
                    .map_or(std::slice::from_ref(schema), Vec::as_slice)
                    .iter()
                    .find_map(|s| {
                        s["allOf"]
                            .as_array()
                            .and_then(|all| all.get(1))
                            .and_then(|n| n.pointer("/properties/error/properties/code/enum"))
                            .and_then(Value::as_array)
                    });
                let Some(codes) = narrowed else {
                    continue;
                };
                for code in codes.iter().filter_map(Value::as_str) {
                    // 431: the lean stream path's head limit, answered with INVALID_REQUEST.
                    if status != "431" {
                        assert_eq!(
                            status_of.get(code).map(u16::to_string).as_deref(),
                            Some(status.as_str()),
                            "{method} {template}: {code} under {status}"
                        );
                    }
                    answered.insert(code);
                }
            }
        }
        for code in status_of.keys() {
            // 405 is answered for undocumented methods, which no operation describes.
            if *code != Code::MethodNotAllowed.as_str() {
                assert!(answered.contains(code), "{code} is on no operation");
            }
        }
    }
}
