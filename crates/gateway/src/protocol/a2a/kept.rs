//! What the ledger keeps of an official A2A Task: a document in two parts, each with a bound of
//! its own, so that a large artifact never costs a task its status, and a long history never
//! costs it its artifacts.
//!
//! - **The artifacts** (the Task's `artifacts` list, as written) are kept whole up to
//!   `[a2a] max_artifact_bytes_per_task` ([`Bounds::artifacts`]).
//! - **The rest** (the Task without its `artifacts`) is kept whole up to
//!   `max_task_document_bytes` ([`Bounds::task`]). Past it the `history` goes first; should the
//!   rest still be over, only `id`, `contextId`, `status` and `kind` are kept, and then the
//!   status keeps only its `state` and `timestamp`.
//!
//! A kept Task is so at most `task + artifacts + 93` bytes ([`Bounds::most`]: 13 are
//! `"artifacts":` and its comma, 80 the room of [`ARTIFACTS_DROPPED`]), whatever the agent
//! sends, as long as its ids fit in the first.
//!
//! # Past the artifact bound
//!
//! What is kept is a prefix of the artifacts' content, in their order, and every artifact stays
//! listed (its `artifactId`, `name`, `description`, `metadata`, `extensions`), so a reader
//! knows what there was and where it stopped:
//!
//! - artifacts are kept whole in order while they fit, with room saved for the listing (the
//!   artifact without its parts) of every artifact after them;
//! - the first that does not fit keeps its listing and its parts in order while they fit; the
//!   first part that does not fit keeps, if it is a text part, the longest start of its text
//!   that fits (cut at a character boundary), and is dropped otherwise (a cut file or data part
//!   would be a broken one); no part after it is kept;
//! - every artifact after it keeps its listing and no parts.
//!
//! An artifact that lost parts says so in its `metadata` (merged into what it had):
//! [`TRUNCATED`] `true`, [`ORIGINAL_BYTES`] (its parts as the agent gave them: each part's JSON,
//! summed) and [`KEPT_BYTES`] (the same of the parts kept).
//!
//! An agent whose listings alone pass the bound (a great many artifacts, or long descriptions or
//! metadata: a hostile one) gets its listings cut to `artifactId` and `name`; should even those
//! pass it, the artifacts past the bound are dropped whole and the Task's own `metadata` says
//! how many ([`ARTIFACTS_DROPPED`]; the room it takes, 80 bytes at most, is the artifacts').
//! Either way every such artifact is counted as cut ([`Kept::cut`]), once: an artifact the
//! ledger cut before (it carries [`ORIGINAL_BYTES`]) and now cuts further is not counted again.
//!
//! # Appends
//!
//! A streamed artifact is folded into the task before it is bounded (`stream::fold`). Parts
//! appended to an artifact the ledger already cut are not kept (they would follow the gap): they
//! are added to its [`ORIGINAL_BYTES`] ([`absorb`]), so the record goes on saying what was lost.
//! The gateway's keys in an artifact's metadata are read as the gateway's: an agent that sends
//! [`TRUNCATED`] itself is taken at its word, and its own appends to that artifact are dropped.

use serde_json::{Map, Value};

use crate::protocol::node::{counted, Json};

/// An artifact's metadata key: the ledger cut it.
pub const TRUNCATED: &str = "a2a-gateway/truncated";
/// An artifact's metadata key: the bytes of its parts as the agent gave them.
pub const ORIGINAL_BYTES: &str = "a2a-gateway/original_bytes";
/// An artifact's metadata key: the bytes of its parts the ledger kept.
pub const KEPT_BYTES: &str = "a2a-gateway/kept_bytes";
/// A Task's metadata key: artifacts the ledger dropped whole (see the module docs).
pub const ARTIFACTS_DROPPED: &str = "a2a-gateway/artifacts_dropped";

/// `"artifacts":` and the comma that joins it to the rest of the Task.
pub const MEMBER_BYTES: usize = 13;

/// Room the artifacts give up when some are dropped whole, for the Task's
/// `,"metadata":{"a2a-gateway/artifacts_dropped":N}` (67 bytes at most).
const DROPPED_ROOM: usize = 80;

/// The two bounds of a recorded Task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounds {
    /// `max_task_document_bytes`: the Task without its artifacts.
    pub task: usize,
    /// `[a2a] max_artifact_bytes_per_task`: its `artifacts` list.
    pub artifacts: usize,
}

impl Bounds {
    /// The most a kept Task can be.
    pub fn most(self) -> usize {
        self.task
            .saturating_add(self.artifacts)
            .saturating_add(MEMBER_BYTES + DROPPED_ROOM)
    }
}

/// Whether `task`, which writes `len` bytes, is kept as it is. One comparison for a Task under
/// both bounds; a larger one has its artifacts measured (counted, not written).
pub fn fits(task: &dyn Json, len: usize, b: Bounds) -> bool {
    if len <= b.task.min(b.artifacts) {
        return true;
    }
    let task_bound = b.task.saturating_add(dropped_room(task));
    let Some(artifacts) = task.get("artifacts") else {
        return len <= task_bound;
    };
    let of_artifacts = artifacts.json_len();
    let joined = task
        .as_object()
        .is_some_and(|o| o.any_key(&|k| k != "artifacts"));
    let rest = len.saturating_sub(of_artifacts + MEMBER_BYTES - 1 + usize::from(joined));
    of_artifacts <= b.artifacts && rest <= task_bound
}

/// The room the rest of a Task kept before has beyond its bound: [`DROPPED_ROOM`] when its
/// `metadata` holds the gateway's [`ARTIFACTS_DROPPED`] (taken from the artifacts' bound).
fn dropped_room(task: &dyn Json) -> usize {
    let said = task
        .get("metadata")
        .and_then(|m| m.get(ARTIFACTS_DROPPED))
        .is_some();
    if said {
        DROPPED_ROOM
    } else {
        0
    }
}

/// A Task cut down to its bounds.
#[derive(Debug)]
pub struct Kept {
    /// The Task as the ledger keeps it.
    pub task: Value,
    /// Artifacts cut or dropped this time that the ledger had not cut before
    /// (`a2a_gateway_artifacts_truncated_total`).
    pub cut: u64,
}

/// `task` as the ledger keeps it (see the module docs). Only the parts that are kept are copied.
pub fn keep(task: &dyn Json, b: Bounds) -> Kept {
    let Some(o) = task.as_object() else {
        // Not a Task: nothing the ledger records (`answer::task_of` reads none from it).
        return Kept {
            task: task.to_value(),
            cut: 0,
        };
    };
    let mut rest = Map::new();
    o.for_each(&mut |k, v| {
        if k != "artifacts" && k != "history" {
            rest.insert(k.to_owned(), v.to_value());
        }
    });
    let task_bound = b.task.saturating_add(dropped_room(task));
    let mut rest = rest_within(rest, task.get("history"), task_bound);
    let Some(artifacts) = task.get("artifacts") else {
        return Kept {
            task: Value::Object(rest),
            cut: 0,
        };
    };
    let kept = match artifacts.to_value() {
        Value::Array(list) => within(list, b.artifacts),
        other if other.json_len() <= b.artifacts => Within {
            list: Some(other),
            cut: 0,
            dropped: 0,
        },
        // Not a list (an agent in `report` mode): nothing to list, dropped whole.
        _ => Within {
            list: None,
            cut: 1,
            dropped: 1,
        },
    };
    if kept.dropped > 0 {
        // Added to what an earlier keep dropped (those are no longer in the list).
        let meta = object_at(&mut rest, "metadata");
        let before = meta
            .get(ARTIFACTS_DROPPED)
            .and_then(Value::as_u64)
            .unwrap_or(0);
        let now = before.saturating_add(kept.dropped);
        meta.insert(ARTIFACTS_DROPPED.to_owned(), Value::from(now));
    }
    if let Some(list) = kept.list {
        rest.insert("artifacts".to_owned(), list);
    }
    Kept {
        task: Value::Object(rest),
        cut: kept.cut,
    }
}

/// Whether `artifact` is one the ledger cut (its metadata says [`TRUNCATED`]): then `more`
/// (the parts an append brings) is not added to it, only counted in its [`ORIGINAL_BYTES`].
pub fn absorb(artifact: &mut Value, more: Option<&Value>) -> bool {
    let Some(meta) = artifact.get_mut("metadata").and_then(Value::as_object_mut) else {
        return false;
    };
    if meta.get(TRUNCATED) != Some(&Value::Bool(true)) {
        return false;
    }
    let was = meta
        .get(ORIGINAL_BYTES)
        .and_then(Value::as_u64)
        .unwrap_or(0);
    let now = was.saturating_add(parts_len(more));
    meta.insert(ORIGINAL_BYTES.to_owned(), Value::from(now));
    true
}

/// The rest of a Task (`rest`, without its history and artifacts) within `max`, with its
/// `history` when that fits too.
fn rest_within(
    mut rest: Map<String, Value>,
    history: Option<&dyn Json>,
    max: usize,
) -> Map<String, Value> {
    let len = counted(&rest);
    if let Some(h) = history {
        let with = len + r#""history":"#.len() + h.json_len() + usize::from(!rest.is_empty());
        if with <= max {
            rest.insert("history".to_owned(), h.to_value());
            return rest;
        }
    }
    if len <= max {
        return rest;
    }
    let mut least = Map::new();
    for k in ["id", "contextId", "status", "kind"] {
        if let Some(v) = rest.remove(k) {
            least.insert(k.to_owned(), v);
        }
    }
    if counted(&least) > max {
        if let Some(Value::Object(status)) = least.get_mut("status") {
            status.retain(|k, _| k == "state" || k == "timestamp");
        }
    }
    least
}

/// What is kept of an `artifacts` list.
struct Within {
    /// The list as kept (none: dropped whole).
    list: Option<Value>,
    /// Artifacts cut or dropped, not cut before.
    cut: u64,
    /// Of those, dropped whole (the Task's [`ARTIFACTS_DROPPED`]).
    dropped: u64,
}

/// How much of an artifact its listing keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Listing {
    /// Everything but its parts.
    Full,
    /// Its `artifactId` and `name`.
    Least,
}

/// The artifacts `list` within `budget` bytes (see the module docs).
fn within(list: Vec<Value>, budget: usize) -> Within {
    let whole: Vec<usize> = list.iter().map(Json::json_len).collect();
    let n = list.len();
    // The brackets and the commas between the artifacts.
    let frame = 2 + n.saturating_sub(1);
    if frame + whole.iter().sum::<usize>() <= budget {
        return Within {
            list: Some(Value::Array(list)),
            cut: 0,
            dropped: 0,
        };
    }
    // What room each artifact after the cut needs: its listing (one with no parts loses
    // nothing, and is kept whole when it is no longer than that).
    let listed = |how| -> Vec<usize> {
        list.iter()
            .zip(&whole)
            .map(|(a, w)| {
                let l = listing(a, how).map_or(0, |l| counted(&l));
                if how == Listing::Full && no_parts(a) {
                    l.min(*w)
                } else {
                    l
                }
            })
            .collect()
    };
    let sum = |v: &[usize]| v.iter().sum::<usize>();
    // An artifact that is not an object cannot be listed: kept whole or dropped.
    let spare = if list.iter().all(Value::is_object) {
        0
    } else {
        DROPPED_ROOM
    };
    let full = listed(Listing::Full);
    let (how, room, reserve, dropping) = if frame + sum(&full) + spare <= budget {
        (Listing::Full, budget - spare, full, false)
    } else {
        let ids = listed(Listing::Least);
        if frame + sum(&ids) + spare <= budget {
            (Listing::Least, budget - spare, ids, false)
        } else {
            // Not even every artifact's id and name: listed in order while they fit.
            let none = vec![0; n];
            (
                Listing::Least,
                budget.saturating_sub(DROPPED_ROOM),
                none,
                true,
            )
        }
    };
    let mut reserved = sum(&reserve);
    let mut used = frame;
    let (mut out, mut cut, mut dropped) = (Vec::with_capacity(n), 0, 0);
    let mut stopped = dropping;
    for (i, a) in list.into_iter().enumerate() {
        // The room for this one: what is left, less the listings of those after it.
        reserved -= reserve[i];
        let room_i = room.saturating_sub(used + reserved);
        let loses_nothing = !stopped || (how == Listing::Full && no_parts(&a));
        if loses_nothing && whole[i] <= room_i {
            used += whole[i];
            out.push(a);
            continue;
        }
        let first = !stopped;
        stopped = true;
        // Counted the first time it is cut: one the ledger cut before is counted already.
        let counted_before = a.as_object().and_then(original_of).is_some();
        let kept = match how {
            Listing::Full => cut_parts(a, room_i, first),
            Listing::Least => least(a),
        };
        match kept.map(|k| (counted(&k), k)) {
            Some((len, k)) if len <= room_i => {
                used += len;
                out.push(k);
            }
            _ => dropped += 1,
        }
        cut += u64::from(!counted_before);
    }
    // Every one dropped: no list at all (the Task's metadata says how many).
    let list = (!out.is_empty() || dropped == 0).then_some(Value::Array(out));
    Within { list, cut, dropped }
}

/// `a`'s listing as `how` keeps it, marked with the largest numbers the marks can hold (what it
/// is measured by: a listing marked later is never longer). None for an artifact that is not an
/// object.
fn listing(a: &Value, how: Listing) -> Option<Map<String, Value>> {
    let m = a.as_object()?;
    let mut l: Map<String, Value> = m
        .iter()
        .filter(|(k, _)| match how {
            Listing::Full => *k != "parts",
            Listing::Least => *k == "artifactId" || *k == "name",
        })
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    l.insert("parts".to_owned(), Value::Array(Vec::new()));
    mark(&mut l, u64::MAX, u64::MAX);
    Some(l)
}

/// Whether the artifact has no parts to lose.
fn no_parts(a: &Value) -> bool {
    a.get("parts")
        .and_then(Value::as_array)
        .is_some_and(Vec::is_empty)
}

/// Artifact `a` in `room` bytes: its listing and, when `with_parts`, its parts in order while
/// they fit (the first that does not, a text part, cut to fit). None for an artifact that is
/// not an object.
fn cut_parts(a: Value, room: usize, with_parts: bool) -> Option<Value> {
    let Value::Object(mut m) = a else { return None };
    let given = m.remove("parts");
    let original = original_of(&m).unwrap_or_else(|| parts_len(given.as_ref()));
    m.insert("parts".to_owned(), Value::Array(Vec::new()));
    mark(&mut m, u64::MAX, u64::MAX);
    let mut left = room.saturating_sub(counted(&m));
    let (mut kept, mut kept_bytes) = (Vec::new(), 0u64);
    if let (true, Some(Value::Array(parts))) = (with_parts, given) {
        for p in parts {
            let comma = usize::from(!kept.is_empty());
            let len = p.json_len();
            if len + comma <= left {
                left -= len + comma;
                kept_bytes += len as u64;
                kept.push(p);
                continue;
            }
            if let Some(c) = cut_text(p, left.saturating_sub(comma)) {
                kept_bytes += c.json_len() as u64;
                kept.push(c);
            }
            break;
        }
    }
    m.insert("parts".to_owned(), Value::Array(kept));
    mark(&mut m, original, kept_bytes);
    Some(Value::Object(m))
}

/// Artifact `a` as its least listing: `artifactId`, `name`, no parts.
fn least(a: Value) -> Option<Value> {
    let Value::Object(mut m) = a else { return None };
    let original = original_of(&m).unwrap_or_else(|| parts_len(m.get("parts")));
    let mut l = Map::new();
    for k in ["artifactId", "name"] {
        if let Some(v) = m.remove(k) {
            l.insert(k.to_owned(), v);
        }
    }
    l.insert("parts".to_owned(), Value::Array(Vec::new()));
    mark(&mut l, original, 0);
    Some(Value::Object(l))
}

/// Text part `p` with the longest start of its text that lets it fit in `room` bytes, cut at a
/// character boundary; None when it is not a text part, or not even one character fits.
fn cut_text(p: Value, room: usize) -> Option<Value> {
    let Value::Object(mut m) = p else { return None };
    let Some(Value::String(mut text)) = m.remove("text") else {
        return None;
    };
    m.insert("text".to_owned(), Value::String(String::new()));
    let mut left = room.checked_sub(counted(&m))?;
    let mut end = 0;
    for (i, c) in text.char_indices() {
        let e = escaped_len(c);
        if e > left {
            break;
        }
        left -= e;
        end = i + c.len_utf8();
    }
    if end == 0 {
        return None;
    }
    text.truncate(end);
    m.insert("text".to_owned(), Value::String(text));
    let part = Value::Object(m);
    (part.json_len() <= room).then_some(part)
}

/// The bytes `c` takes in a JSON string as serde_json writes it.
fn escaped_len(c: char) -> usize {
    match c {
        '"' | '\\' | '\u{8}' | '\u{c}' | '\n' | '\r' | '\t' => 2,
        c if u32::from(c) < 0x20 => 6,
        c => c.len_utf8(),
    }
}

/// The original size an artifact the ledger cut before carries.
fn original_of(m: &Map<String, Value>) -> Option<u64> {
    let meta = m.get("metadata")?.as_object()?;
    if meta.get(TRUNCATED) != Some(&Value::Bool(true)) {
        return None;
    }
    meta.get(ORIGINAL_BYTES).and_then(Value::as_u64)
}

/// The bytes of `parts` as [`ORIGINAL_BYTES`] counts them: each part's JSON, summed (a value
/// that is not a list, as a whole).
fn parts_len(parts: Option<&Value>) -> u64 {
    let len = match parts {
        Some(Value::Array(ps)) => ps.iter().map(Json::json_len).sum(),
        Some(other) => other.json_len(),
        None => 0,
    };
    len as u64
}

/// Mark an artifact cut, in its metadata (merged into what it had; metadata that is not an
/// object, which the proto does not allow, is replaced).
fn mark(m: &mut Map<String, Value>, original: u64, kept: u64) {
    let meta = object_at(m, "metadata");
    meta.insert(TRUNCATED.to_owned(), Value::Bool(true));
    meta.insert(ORIGINAL_BYTES.to_owned(), Value::from(original));
    meta.insert(KEPT_BYTES.to_owned(), Value::from(kept));
}

/// Member `key` of `m` as an object, made one if it is absent or not one.
fn object_at<'a>(m: &'a mut Map<String, Value>, key: &str) -> &'a mut Map<String, Value> {
    let v = m.entry(key).or_insert_with(|| Value::Object(Map::new()));
    if !v.is_object() {
        *v = Value::Object(Map::new());
    }
    match v {
        Value::Object(o) => o,
        _ => unreachable!("made an object above"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn b(task: usize, artifacts: usize) -> Bounds {
        Bounds { task, artifacts }
    }

    fn len(v: &Value) -> usize {
        v.json_len()
    }

    fn text(id: &str, t: &str) -> Value {
        json!({"artifactId": id, "name": format!("{id}.txt"), "parts": [{"text": t}]})
    }

    fn task_with(artifacts: Value) -> Value {
        json!({"id": "t", "contextId": "c", "status": {"state": "TASK_STATE_COMPLETED"},
            "artifacts": artifacts})
    }

    /// What the ledger keeps of `t` within `b`, checked against the bound it promises.
    fn kept(t: &Value, b: Bounds) -> Kept {
        assert!(!fits(t, len(t), b), "over a bound: {b:?}");
        let k = keep(t, b);
        assert!(len(&k.task) <= b.most(), "{} > {}", len(&k.task), b.most());
        if let Some(a) = k.task.get("artifacts") {
            assert!(len(a) <= b.artifacts, "{} > {}", len(a), b.artifacts);
        }
        k
    }

    fn marks(a: &Value) -> (bool, u64, u64) {
        let m = &a["metadata"];
        (
            m[TRUNCATED] == json!(true),
            m[ORIGINAL_BYTES].as_u64().unwrap_or(0),
            m[KEPT_BYTES].as_u64().unwrap_or(0),
        )
    }

    #[test]
    fn one_large_text_is_cut_at_a_character_and_says_so() {
        // Two-byte characters and escapes: the cut falls on a character, never inside one.
        let body: String = "é\"ab\n".repeat(2_000);
        let mut a = text("a", &body);
        a["description"] = json!("the report");
        a["metadata"] = json!({"lang": "fr"});
        let t = task_with(json!([a]));
        let k = kept(&t, b(1 << 20, 1_000));
        assert_eq!(k.cut, 1);
        let got = &k.task["artifacts"][0];
        // Listed as it was, its metadata merged.
        assert_eq!(
            (&got["artifactId"], &got["name"], &got["description"]),
            (&json!("a"), &json!("a.txt"), &json!("the report"))
        );
        assert_eq!(got["metadata"]["lang"], "fr");
        let kept_text = got["parts"][0]["text"].as_str().expect("a text kept");
        assert!(body.starts_with(kept_text) && !kept_text.is_empty());
        // Most of the room used: what is lost is the marks' room measured at their widest
        // (20 digits each) and at most one character.
        let used = len(&k.task["artifacts"]);
        assert!(used > 1_000 - 45, "most of the room used: {used}");
        let part_len = len(&json!({"text": body}));
        assert_eq!(
            marks(got),
            (true, part_len as u64, len(&got["parts"][0]) as u64)
        );
        // The rest is whole: only the artifact was over.
        assert_eq!(k.task["status"], t["status"]);
    }

    #[test]
    fn past_the_bound_every_artifact_stays_listed_and_the_content_is_a_prefix() {
        let t = task_with(json!([
            text("a", &"a".repeat(300)),
            {"artifactId": "b", "parts": [{"text": "b".repeat(300)}, {"data": {"n": "x".repeat(400)}},
                {"text": "tiny"}]},
            text("c", "c"),
            {"artifactId": "d", "name": "empty", "parts": []},
        ]));
        let k = kept(&t, b(1 << 20, 1_200));
        let list = k.task["artifacts"].as_array().expect("a list");
        let ids: Vec<&str> = list
            .iter()
            .filter_map(|a| a["artifactId"].as_str())
            .collect();
        assert_eq!(ids, ["a", "b", "c", "d"], "every artifact, in order");
        // The first whole, unmarked.
        assert_eq!(list[0], t["artifacts"][0]);
        // The second: its first part whole, the data part that does not fit dropped, and
        // nothing after it (not even the tiny text that would fit).
        assert_eq!(list[1]["parts"], json!([{"text": "b".repeat(300)}]));
        let (cut, original, kept_bytes) = marks(&list[1]);
        assert!(cut);
        let parts = t["artifacts"][1]["parts"].as_array().expect("parts");
        assert_eq!(original, parts.iter().map(len).sum::<usize>() as u64);
        assert_eq!(kept_bytes, len(&parts[0]) as u64);
        // The third, after the cut: listed, no parts, marked.
        assert_eq!(list[2]["parts"], json!([]));
        assert_eq!(
            marks(&list[2]),
            (true, len(&json!({"text": "c"})) as u64, 0)
        );
        // An artifact with no parts loses nothing: whole.
        assert_eq!(list[3], t["artifacts"][3]);
        assert_eq!(k.cut, 2);
    }

    #[test]
    fn listings_over_the_bound_keep_ids_and_names_then_drop_and_say_how_many() {
        let many: Vec<Value> = (0..40)
            .map(|i| {
                json!({"artifactId": format!("art-{i:02}"), "name": "n", "description": "d".repeat(100),
                    "parts": [{"text": "x"}]})
            })
            .collect();
        let t = task_with(Value::Array(many));
        // Room for every id and name, not the descriptions.
        let k = kept(&t, b(1 << 20, 40 * 150));
        let list = k.task["artifacts"].as_array().expect("a list");
        assert_eq!(list.len(), 40);
        assert!(list
            .iter()
            .all(|a| a.get("description").is_none() && marks(a).0));
        assert_eq!(k.cut, 40);
        assert!(k.task.get("metadata").is_none());
        // Room for a few ids: the rest dropped whole, and the task says how many (merged
        // into its own metadata).
        let mut t = t;
        t["metadata"] = json!({"mine": 1});
        let k = kept(&t, b(1 << 20, 1_000));
        let list = k.task["artifacts"].as_array().expect("a list");
        assert!(!list.is_empty() && list.len() < 40);
        assert_eq!(list[0]["artifactId"], "art-00");
        assert_eq!(
            k.task["metadata"],
            json!({"mine": 1, ARTIFACTS_DROPPED: 40 - list.len()})
        );
        assert_eq!(k.cut, 40);
    }

    #[test]
    fn every_bound_holds_and_keeping_again_changes_nothing() {
        let t = json!({"id": "t", "contextId": "c",
            "status": {"state": "TASK_STATE_WORKING", "message": {"messageId": "s", "parts": [{"text": "s".repeat(500)}]}},
            "history": [{"messageId": "h", "parts": [{"text": "h".repeat(800)}]}],
            "metadata": {"k": "v"},
            "artifacts": [text("a", &"α".repeat(200)), {"artifactId": "b", "parts": [{"raw": "QUJD".repeat(100)}]},
                "not an artifact", text("c", "ç\\".repeat(100).as_str())]});
        // From the first task bound its ids and state fit in (the least the rest is kept as).
        for task in (97..2_000).step_by(97) {
            for artifacts in (0..3_000).step_by(61) {
                let at = b(task, artifacts);
                if fits(&t, len(&t), at) {
                    continue;
                }
                let k = kept(&t, at);
                // Kept again: within its bounds as it is (nothing more cut, nothing counted).
                assert!(fits(&k.task, len(&k.task), at), "{at:?}: {}", k.task);
                // Its ids stay, whatever the bound of the rest.
                assert_eq!(
                    (&k.task["id"], &k.task["contextId"]),
                    (&t["id"], &t["contextId"])
                );
            }
        }
        // The rest: the history first, then the least, then the status message.
        let rest_len = len(&t) - len(&t["artifacts"]) - MEMBER_BYTES;
        let k = kept(&t, b(rest_len - 1, 1 << 20));
        assert!(k.task.get("history").is_none() && k.task["metadata"] == json!({"k": "v"}));
        assert_eq!(k.task["artifacts"], t["artifacts"]);
        // The least (ids and the whole status), its metadata dropped with the history.
        let least = json!({"id": t["id"], "contextId": t["contextId"], "status": t["status"]});
        let k = kept(&t, b(len(&least), 1 << 20));
        assert!(k.task.get("metadata").is_none());
        assert_eq!(k.task["status"], t["status"]);
        let k = kept(&t, b(100, 1 << 20));
        assert_eq!(k.task["status"], json!({"state": "TASK_STATE_WORKING"}));
        assert_eq!(k.cut, 0);
    }

    #[test]
    fn appends_to_a_cut_artifact_are_counted_not_kept() {
        use crate::protocol::a2a::answer::payload;
        use crate::protocol::a2a::stream::fold;
        let t = task_with(json!([text("a", &"a".repeat(2_000))]));
        let mut task = kept(&t, b(1 << 20, 500)).task;
        let before = task["artifacts"][0]["parts"].clone();
        let (_, original, kept_bytes) = marks(&task["artifacts"][0]);
        let more = json!({"artifactUpdate": {"taskId": "t", "contextId": "c", "append": true,
            "lastChunk": true, "artifact": {"artifactId": "a", "parts": [{"text": "more"}, {"text": "!"}]}}});
        fold(&mut task, payload(&more).expect("an update"));
        let a = &task["artifacts"][0];
        assert_eq!(a["parts"], before, "nothing after the gap");
        let added = (len(&json!({"text": "more"})) + len(&json!({"text": "!"}))) as u64;
        assert_eq!(marks(a), (true, original + added, kept_bytes));
        // Kept again: nothing more cut.
        assert!(fits(&task, len(&task), b(1 << 20, 500)));
        // Cut further (a smaller bound, or an artifact after it): not counted again.
        let further = keep(&task, b(1 << 20, 300));
        assert_eq!(marks(&further.task["artifacts"][0]).1, original + added);
        assert_eq!(further.cut, 0);
        // An artifact not cut takes its appends.
        let mut whole = task_with(json!([text("b", "x")]));
        let mut v = json!({"text": "y"});
        assert!(!absorb(&mut whole["artifacts"][0], Some(&v)));
        assert!(!absorb(&mut v, None));
    }
}
