//! Compiles docs/spec/a2a-1.0.1/a2a.proto (the normative proto, kept in the repo as the spec)
//! into a FileDescriptorSet in OUT_DIR, read at run time by prost-reflect.
//!
//! The proto imports `google/api/{annotations,client,field_behavior}.proto` for HTTP
//! annotations, method signatures and field behaviours: options that say nothing about the
//! wire form of a message. Those files are third-party and not copied into the repo, so their
//! imports and every `(google.api.*)` option are left out of the text before it is compiled.
//! The `google/protobuf/*` imports are protox's own well-known types. protox is pure Rust: no
//! system `protoc`.

use std::path::PathBuf;

fn main() {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets it"));
    let proto = manifest.join("../../docs/spec/a2a-1.0.1/a2a.proto");
    println!("cargo:rerun-if-changed={}", proto.display());
    println!("cargo:rerun-if-changed=build.rs");
    let text = std::fs::read_to_string(&proto)
        .unwrap_or_else(|e| panic!("reading {}: {e}", proto.display()));
    let stripped = strip_google_api(&text);
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets it"));
    let dir = out.join("proto");
    std::fs::create_dir_all(&dir).expect("OUT_DIR is writable");
    std::fs::write(dir.join("a2a.proto"), stripped).expect("OUT_DIR is writable");
    let set = protox::compile([dir.join("a2a.proto")], [&dir])
        .unwrap_or_else(|e| panic!("compiling a2a.proto: {e:?}"));
    let bytes = prost::Message::encode_to_vec(&set);
    std::fs::write(out.join("a2a.bin"), bytes).expect("OUT_DIR is writable");
}

/// The proto text without `import "google/api/..."` lines and without any `(google.api.*)`
/// option: a statement `option (google.api.x) = ...;` (its value may be a `{...}` block over
/// many lines), or a field option `[(google.api.x) = V]` (alone in its brackets, or one of a
/// list).
fn strip_google_api(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix("import \"google/api/") {
            rest = after.split_once('\n').map_or("", |(_, r)| r);
            continue;
        }
        if let Some(after) = rest.strip_prefix("option (google.api.") {
            rest = skip_statement(after);
            continue;
        }
        if let Some(after) = rest.strip_prefix("[(google.api.") {
            let (end, more) = field_option_end(after);
            rest = &after[end..];
            if more {
                // `[(google.api.x) = V, other = W]`: keep the bracket for the others.
                out.push('[');
            }
            continue;
        }
        if let Some(after) = rest.strip_prefix(", (google.api.") {
            let (end, _) = field_option_end(after);
            rest = &after[end..];
            continue;
        }
        let c = rest.chars().next().expect("not empty");
        out.push(c);
        rest = &rest[c.len_utf8()..];
    }
    out
}

/// After `option (google.api.`: the text after its closing `;`, braces balanced (string
/// literals may hold braces and semicolons).
fn skip_statement(s: &str) -> &str {
    let mut depth = 0i32;
    let mut in_string = false;
    let mut prev = '\0';
    for (i, c) in s.char_indices() {
        if in_string {
            if c == '"' && prev != '\\' {
                in_string = false;
            }
        } else {
            match c {
                '"' => in_string = true,
                '{' => depth += 1,
                '}' => depth -= 1,
                ';' if depth == 0 => return &s[i + 1..],
                _ => {}
            }
        }
        prev = c;
    }
    ""
}

/// After `[(google.api.` or `, (google.api.`: where the option ends (at `]`, dropped when it
/// ends the list, or before `,` when others follow), and whether others follow.
fn field_option_end(s: &str) -> (usize, bool) {
    for (i, c) in s.char_indices() {
        match c {
            ']' => return (i + 1, false),
            ',' => {
                // `, other]`: skip the comma and its space, keep the rest for the bracket.
                let rest = &s[i + 1..];
                let skipped = rest.len() - rest.trim_start().len();
                return (i + 1 + skipped, true);
            }
            _ => {}
        }
    }
    (s.len(), false)
}
