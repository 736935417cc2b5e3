//! The README is a front door and the docs hold together in a clone: every relative link in
//! README.md and docs/*.md names a file of the repo (and, into a Markdown file, one of its
//! headings), nothing links outside the repo except by URL, the README links every docs/*.md,
//! stays short, and gives `scripts/test` as the test command.

use std::collections::BTreeSet;
use std::path::{Component, Path, PathBuf};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The Markdown files the checks cover: README.md and the top of docs/.
fn documents() -> Vec<PathBuf> {
    let mut out = vec![root().join("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .expect("docs/")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    out.extend(docs);
    out
}

/// Every `](target)` outside code blocks, with its line number.
fn links(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut fenced = false;
    for (n, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        }
        if !fenced {
            let mut rest = line;
            while let Some(at) = rest.find("](") {
                let after = &rest[at + 2..];
                let end = after.find(')').unwrap_or(after.len());
                out.push((n + 1, after[..end].trim().to_owned()));
                rest = &after[end..];
            }
        }
    }
    out
}

/// GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-' || *c == '_')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

fn anchors(markdown: &str) -> BTreeSet<String> {
    let mut fenced = false;
    let mut out = BTreeSet::new();
    for line in markdown.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        }
        if !fenced && line.starts_with('#') {
            out.insert(slug(line.trim_start_matches('#')));
        }
    }
    out
}

/// `path` made plain (`a/./b/../c` is `a/c`); `None` if it climbs out of the repo.
fn within_repo(path: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::Normal(p) => out.push(p),
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    return None;
                }
            }
            _ => return None,
        }
    }
    Some(out)
}

#[test]
fn every_link_of_the_readme_and_the_docs_resolves_in_a_clone() {
    let mut problems = Vec::new();
    let mut checked = 0;
    for doc in documents() {
        let text = read(&doc);
        let rel_doc = doc.strip_prefix(root()).expect("in the repo").to_path_buf();
        let dir = rel_doc.parent().unwrap_or(Path::new("")).to_path_buf();
        for (line, target) in links(&text) {
            let at = format!("{}:{line}: {target}", rel_doc.display());
            if target.starts_with("https://") || target.starts_with("http://") {
                continue;
            }
            if target.contains("://") || target.starts_with("mailto:") {
                problems.push(format!("{at}: not a web URL"));
                continue;
            }
            let (file, anchor) = match target.split_once('#') {
                Some((f, a)) => (f, Some(a)),
                None => (target.as_str(), None),
            };
            let resolved = if file.is_empty() {
                Some(rel_doc.clone())
            } else {
                within_repo(&dir.join(file))
            };
            let Some(resolved) = resolved else {
                problems.push(format!("{at}: leaves the repo"));
                continue;
            };
            let full = root().join(&resolved);
            if !full.exists() {
                problems.push(format!("{at}: {} does not exist", resolved.display()));
                continue;
            }
            let tracked = std::process::Command::new("git")
                .args(["ls-files", "--error-unmatch"])
                .arg(&resolved)
                .current_dir(root())
                .output()
                .map(|o| o.status.success())
                // Outside a git checkout (a source tarball) existing is enough.
                .unwrap_or(true);
            if !tracked && full.is_file() {
                problems.push(format!(
                    "{at}: {} is not in the repo (untracked)",
                    resolved.display()
                ));
            }
            if let Some(anchor) = anchor {
                if full.extension().is_some_and(|e| e == "md")
                    && !anchors(&read(&full)).contains(anchor)
                {
                    problems.push(format!(
                        "{at}: no heading #{anchor} in {}",
                        resolved.display()
                    ));
                }
            }
            checked += 1;
        }
    }
    assert!(checked >= 30, "only {checked} links checked");
    assert!(
        problems.is_empty(),
        "{} broken links:\n  {}",
        problems.len(),
        problems.join("\n  ")
    );
}

#[test]
fn the_readme_is_a_short_front_door_that_links_every_doc_and_runs_scripts_test() {
    let readme = read(&root().join("README.md"));
    let lines = readme.lines().count();
    assert!(lines <= 260, "README.md has {lines} lines");
    // The test command, on a line of its own in a sh block.
    let mut in_sh = false;
    let mut found = false;
    for line in readme.lines() {
        match line.trim() {
            "```sh" => in_sh = true,
            "```" => in_sh = false,
            "scripts/test" if in_sh => found = true,
            _ => {}
        }
    }
    assert!(found, "no `scripts/test` line in a ```sh block");
    assert!(
        !readme.contains("cargo test --workspace"),
        "the README gives scripts/test as the test command"
    );
    assert!(root().join("scripts/test").is_file());
    // The demo command, and the front door's parts.
    for want in [
        "cargo run --release -- demo",
        "example-config",
        "check-config",
        "sample-agent",
        "docs/images/fleet-page.png",
    ] {
        assert!(readme.contains(want), "the README lacks {want}");
    }
    let linked: BTreeSet<String> = links(&readme).into_iter().map(|(_, t)| t).collect();
    for doc in documents().into_iter().skip(1) {
        let rel = doc
            .strip_prefix(root())
            .expect("in the repo")
            .display()
            .to_string();
        assert!(
            linked
                .iter()
                .any(|l| l.split('#').next() == Some(rel.as_str())),
            "the README does not link {rel}"
        );
    }
    // .ci/run calls the same script.
    assert!(read(&root().join(".ci/run")).contains("scripts/test"));
}

/// The readers above, on inputs of known shape.
#[test]
fn the_link_and_heading_readers() {
    let md = "# Top\n[a](b.md) and ![x\ny](img.png#z)\n```\n[not](a-link)\n```\n## Redis: one node, a cluster\n";
    let got: Vec<String> = links(md).into_iter().map(|(_, t)| t).collect();
    assert_eq!(got, ["b.md", "img.png#z"]);
    let a = anchors(md);
    assert!(
        a.contains("top") && a.contains("redis-one-node-a-cluster"),
        "{a:?}"
    );
    assert_eq!(
        within_repo(Path::new("docs/../README.md")),
        Some(PathBuf::from("README.md"))
    );
    assert_eq!(within_repo(Path::new("../shared/spec.txt")), None);
}
