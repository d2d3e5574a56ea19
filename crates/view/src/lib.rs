//! Pages a person reads: an episode page (its timeline drawn over the revisions it
//! went through, every check marked current or stale), episode lists, and the store's
//! index. One renderer serves both ways of getting them: `epistore ui` renders a page
//! per request, and `show --format html` / `leaderboard --with-episodes` write the same
//! pages into a static folder.
//!
//! Each page is one self-contained HTML document (`page.html`): the data is built here
//! as JSON, embedded in the page, and drawn by the page's own script. Every link in the
//! data is computed here by [`Links`], so the page never builds a URL and the same
//! script works over a server and from a folder.

mod episode;
mod list;

use std::collections::HashSet;
use std::sync::Arc;

use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};
use serde_json::Value;

pub use episode::{compare_doc, episode_doc, FilePolicy};
pub use list::{list_doc, list_rows, ListRow};

/// The `schema` of every page's data.
pub const SCHEMA: &str = "epistore-page/1";

const TEMPLATE: &str = include_str!("page.html");

/// The DOM helpers every page's script starts from (this crate's pages and the
/// leaderboard's), put where a template says `/*EPISTORE_DOM_JS*/`.
pub const DOM_JS: &str = include_str!("dom.js");

/// `template` with its `/*EPISTORE_DOM_JS*/` replaced by [`DOM_JS`].
pub fn with_dom_helpers(template: &str) -> String {
    template.replacen("/*EPISTORE_DOM_JS*/", DOM_JS, 1)
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Store(#[from] epistore_store::Error),
    #[error("no episode {0} in this store")]
    NoEpisode(String),
    #[error(transparent)]
    Json(#[from] serde_json::Error),
}

pub type Result<T> = std::result::Result<T, Error>;

/// Where a page's links point.
#[derive(Clone, Debug)]
pub enum Links {
    /// Pages served by `epistore ui`: absolute paths under its root.
    Server,
    /// A static folder: `index.html` (the board), `entries/N.html` (an entry's
    /// episodes), `episodes/ID.html`. `depth` is how many folders below the root the
    /// page being rendered sits; only episodes in `written` are linked, so a published
    /// folder has no dead links.
    Static { depth: usize, written: Arc<HashSet<String>> },
    /// A static folder whose episodes are hosted elsewhere (`--episode-url`): every
    /// episode links to `template` with `{id}` replaced; home is the folder's board.
    External { depth: usize, template: Arc<str> },
    /// A page on its own (`show --format html`): no links.
    None,
}

/// Characters kept as they are in a path segment or query value; everything else is
/// percent-encoded (so a file path or a cell key can never leave its segment).
const KEEP: &AsciiSet = &NON_ALPHANUMERIC.remove(b'-').remove(b'_').remove(b'.').remove(b'~');

/// A path segment or query value, percent-encoded.
pub fn encode(text: &str) -> String {
    utf8_percent_encode(text, KEEP).to_string()
}

impl Links {
    fn up(depth: usize) -> String {
        "../".repeat(depth)
    }

    /// The page of an episode.
    pub fn episode(&self, id: &str) -> Option<String> {
        match self {
            Links::Server => Some(format!("/episodes/{id}")),
            Links::Static { depth, written } => {
                written.contains(id).then(|| format!("{}episodes/{id}.html", Self::up(*depth)))
            }
            Links::External { template, .. } => Some(template.replace("{id}", &encode(id))),
            Links::None => None,
        }
    }

    /// A page of a published folder (its ids link within it or to `--episode-url`).
    pub fn is_static(&self) -> bool {
        matches!(self, Links::Static { .. } | Links::External { .. })
    }

    /// One file of an episode's package, served as it was ingested (server only: a
    /// static folder inlines what it carries).
    pub fn file(&self, id: &str, path: &str) -> Option<String> {
        match self {
            Links::Server => {
                let segments: Vec<String> = path.split('/').map(encode).collect();
                Some(format!("/episodes/{id}/files/{}", segments.join("/")))
            }
            _ => None,
        }
    }

    /// The store's episode list with these filters (server only): `/episodes?k=v&...`,
    /// each value encoded; no filters, every episode.
    pub fn episodes(&self, filters: &[(&str, &str)]) -> Option<String> {
        match self {
            Links::Server => {
                let query: Vec<String> = filters.iter().map(|(k, v)| format!("{k}={}", encode(v))).collect();
                Some(if query.is_empty() { "/episodes".into() } else { format!("/episodes?{}", query.join("&")) })
            }
            _ => None,
        }
    }

    /// The episode list of a cell (server only).
    pub fn cell(&self, model: &str, harness_level: &str, task: &str) -> Option<String> {
        self.episodes(&[("model", model), ("harness_level", harness_level), ("task", task)])
    }

    /// The page comparing two episodes side by side (server only).
    pub fn compare(&self, a: &str, b: &str) -> Option<String> {
        match self {
            Links::Server => Some(format!("/compare?a={}&b={}", encode(a), encode(b))),
            _ => None,
        }
    }

    /// The starting page: the index (server) or the board (static folder).
    pub fn home(&self) -> Option<String> {
        match self {
            Links::Server => Some("/".into()),
            Links::Static { depth, .. } | Links::External { depth, .. } => {
                Some(format!("{}index.html", Self::up(*depth)))
            }
            Links::None => None,
        }
    }

    /// The breadcrumb of a page: home, then the given steps.
    pub fn nav(&self, steps: &[(&str, Option<String>)]) -> Value {
        let home = match self {
            Links::Static { .. } | Links::External { .. } => "Leaderboard",
            _ => "Index",
        };
        let mut nav: Vec<Value> = Vec::new();
        if let Some(href) = self.home() {
            nav.push(serde_json::json!({"label": home, "href": href}));
        }
        for (label, href) in steps {
            nav.push(serde_json::json!({"label": label, "href": href}));
        }
        Value::Array(nav)
    }
}

/// JSON that may sit inside a `<script>` element: `</script>` would end it and `<!--`
/// can make the parser skip the real end tag, so no `<`, `>` or `&` appears literally
/// (their `\u` escapes are the same JSON strings). U+2028/2029 are escaped for engines
/// older than ES2019.
pub fn script_json(value: &impl serde::Serialize) -> Result<String> {
    let json = serde_json::to_string(value)?;
    // One pass: a page can carry megabytes of records.
    let mut out = String::with_capacity(json.len() + json.len() / 16);
    for c in json.chars() {
        match c {
            '<' => out.push_str("\\u003c"),
            '>' => out.push_str("\\u003e"),
            '&' => out.push_str("\\u0026"),
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            c => out.push(c),
        }
    }
    Ok(out)
}

/// Text safe between HTML tags and inside quoted attributes.
pub fn escape_html(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// A page's HTML from its data (an object with `kind` and `title`).
pub fn render(data: &Value) -> Result<String> {
    let title = data.get("title").and_then(Value::as_str).unwrap_or("epistore");
    let mut page = with_dom_helpers(TEMPLATE);
    if policy(data) != PAGE_POLICY {
        page = page.replacen(PAGE_POLICY, policy(data), 1);
    }
    // The title first: the second pass then runs over the template, not the data.
    Ok(page.replacen("EPISTORE_PAGE_TITLE", &escape_html(title), 1).replacen(
        "/*EPISTORE_PAGE_DATA*/null",
        &script_json(data)?,
        1,
    ))
}

/// A page of a published folder, with the template's style and script in shared files
/// ([`static_assets`], under `assets/` at the folder's root, `depth` folders up): the
/// page holds its data and a few lines of markup, so a thousand pages do not carry a
/// thousand copies of the template.
pub fn render_static(data: &Value, depth: usize) -> Result<String> {
    let parts = Parts::get();
    let title = data.get("title").and_then(Value::as_str).unwrap_or("epistore");
    let up = "../".repeat(depth);
    let head =
        parts.head.replacen(PAGE_POLICY, STATIC_POLICY, 1).replacen("EPISTORE_PAGE_TITLE", &escape_html(title), 1);
    Ok(format!(
        "{head}<link rel=\"stylesheet\" href=\"{up}assets/{css}\">\n</head>\n{body}<script>\nconst DATA = {data};\nwindow.EPISTORE_PAGE = DATA;\n</script>\n<script src=\"{up}assets/{js}\"></script>\n</body>\n</html>\n",
        css = parts.css_name,
        js = parts.js_name,
        body = parts.body,
        data = script_json(data)?,
    ))
}

/// The shared files of a published folder, (name under `assets/`, content). Each name
/// carries a hash of its content, so a page never runs with another build's script.
pub fn static_assets() -> Vec<(String, String)> {
    let parts = Parts::get();
    vec![(parts.css_name.clone(), parts.css.to_string()), (parts.js_name.clone(), parts.js.clone())]
}

/// The template cut where a page with shared assets is cut: what comes before its
/// style, the style, the markup between style and script, and the script after the
/// lines that declare the data.
struct Parts {
    head: &'static str,
    css: &'static str,
    css_name: String,
    body: &'static str,
    js: String,
    js_name: String,
}

impl Parts {
    fn get() -> &'static Parts {
        static PARTS: std::sync::OnceLock<Parts> = std::sync::OnceLock::new();
        PARTS.get_or_init(|| {
            const DATA_LINES: &str = "const DATA = /*EPISTORE_PAGE_DATA*/null;\nwindow.EPISTORE_PAGE = DATA;\n";
            let cut = |text: &'static str, marker: &str| -> (&'static str, &'static str) {
                let at = text.find(marker).unwrap_or_else(|| panic!("page.html has no {marker:?}"));
                (&text[..at], &text[at + marker.len()..])
            };
            let (head, rest) = cut(TEMPLATE, "<style>\n");
            let (css, rest) = cut(rest, "</style>\n</head>\n");
            let (body, rest) = cut(rest, "<script>\n");
            let (_, rest) = cut(rest, DATA_LINES);
            let (script, _) = cut(rest, "</script>\n</body>");
            let js = with_dom_helpers(script);
            let named = |stem: &str, ext: &str, content: &str| {
                format!("{stem}-{}.{ext}", &blake3::hash(content.as_bytes()).to_hex()[..12])
            };
            Parts { head, css, css_name: named("page", "css", css), body, js_name: named("page", "js", &js), js }
        })
    }
}

/// The pages' content security policy, as the template's `<meta>` has it: a page may run
/// its own inline script and style and nothing else (no fetch, no frame, no image but
/// data URLs). A server sends the same in its header ([`policy`]).
macro_rules! page_policy {
    () => {
        "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:"
    };
}
pub const PAGE_POLICY: &str = page_policy!();
/// A live page's (`live` in its data: the index and the episode lists `epistore ui`
/// serves, following the store as it grows): it may also ask its own server, and only
/// it, for the snapshot and its data again.
pub const LIVE_POLICY: &str = concat!(page_policy!(), "; connect-src 'self'");
/// A published page's ([`render_static`]): its own inline data, and the folder's shared
/// script and style, nothing else.
const STATIC_POLICY: &str =
    "default-src 'none'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; img-src data:";

/// The policy of a page with this data.
pub fn policy(data: &Value) -> &'static str {
    if data.get("live").is_some() {
        LIVE_POLICY
    } else {
        PAGE_POLICY
    }
}

/// The data of the index page: the store's headline figures and metrics (computed by
/// the caller with SQL), its groups of cells (model, level, source format) and the
/// leaderboards on offer.
pub fn index_doc(store: Value, headline: Value, cells: Vec<Value>, leaderboards: Vec<Value>) -> Value {
    serde_json::json!({
        "kind": "index",
        "schema": SCHEMA,
        "generated_by": generated_by(),
        "title": "epistore: episodes by model and level",
        "nav": [],
        "store": store,
        "headline": headline,
        "cells": cells,
        "leaderboards": leaderboards,
    })
}

/// A page that says what went wrong (an unknown episode, a bad request).
pub fn message_doc(title: &str, message: &str, links: &Links) -> Value {
    serde_json::json!({
        "kind": "message",
        "schema": SCHEMA,
        "generated_by": generated_by(),
        "title": title,
        "nav": links.nav(&[]),
        "message": message,
    })
}

pub(crate) fn generated_by() -> String {
    format!("epistore {}", env!("CARGO_PKG_VERSION"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn script_json_never_ends_the_script() {
        let text = script_json(&serde_json::json!({"t": "</script><!-- & \u{2028}"})).unwrap();
        assert!(!text.contains('<') && !text.contains('>') && !text.contains('&') && !text.contains('\u{2028}'));
        let back: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(back["t"], "</script><!-- & \u{2028}");
    }

    #[test]
    fn file_links_keep_each_segment_in_place() {
        let href = Links::Server.file("ab", "artifacts/source/x y?#/%2e.txt").unwrap();
        assert_eq!(href, "/episodes/ab/files/artifacts/source/x%20y%3F%23/%252e.txt");
        assert_eq!(
            Links::Server.cell("m/1", "H3", "a&b=c").unwrap(),
            "/episodes?model=m%2F1&harness_level=H3&task=a%26b%3Dc"
        );
        assert_eq!(Links::Server.episodes(&[]).unwrap(), "/episodes");
        assert_eq!(Links::Static { depth: 0, written: Arc::default() }.episodes(&[("model", "m")]), None);
    }

    #[test]
    fn a_rendered_page_has_its_helpers_and_no_placeholder_left() {
        let html = render(&message_doc("a <title>", "m", &Links::None)).unwrap();
        assert!(!html.contains("/*EPISTORE_") && !html.contains("EPISTORE_PAGE_TITLE"), "a placeholder was left");
        assert!(html.contains("function el(tag, props)") && html.contains("<title>a &lt;title&gt;</title>"));
    }

    #[test]
    fn only_a_live_page_may_ask_its_own_server() {
        let mut data = message_doc("t", "m", &Links::None);
        let meta = |html: &str| html.lines().find(|l| l.contains("Content-Security-Policy")).unwrap().to_string();
        let still = meta(&render(&data).unwrap());
        assert!(still.contains(PAGE_POLICY) && !still.contains("connect-src"), "{still}");
        data["live"] = serde_json::json!({"snapshot": 3});
        let live = meta(&render(&data).unwrap());
        assert!(live.contains("; connect-src 'self'\""), "{live}");
    }

    #[test]
    fn static_links_only_to_written_episodes() {
        let written: HashSet<String> = ["a".to_string()].into();
        let links = Links::Static { depth: 1, written: Arc::new(written) };
        assert_eq!(links.episode("a").as_deref(), Some("../episodes/a.html"));
        assert_eq!(links.episode("b"), None);
        assert_eq!(links.home().as_deref(), Some("../index.html"));
        assert_eq!(Links::None.episode("a"), None);
    }
}
