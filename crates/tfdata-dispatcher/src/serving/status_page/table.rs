//! The status page's table pieces, shared by its sections ([`super::html`]
//! and [`super::autocache`]): a collapsible table, its empty and "showing
//! n of m" notes, bounded name cells, bars.

use std::fmt::Write as _;

use super::format::{self, escape, truncate};

/// Characters shown of an address, name or id, and of a path or error.
pub(super) const MAX_NAME_CHARS: usize = 80;
pub(super) const MAX_TEXT_CHARS: usize = 300;

/// Opens a collapsible section `id` with a table of `columns` (a leading
/// `>` right-aligns a numeric column).
pub(super) fn open_table(
    h: &mut String,
    id: &str,
    heading: &str,
    total: usize,
    shown: usize,
    columns: &[&str],
) {
    let count = if shown < total {
        format!("{total} · showing {shown}")
    } else {
        total.to_string()
    };
    let _ = write!(
        h,
        r#"<details class="panel" id="{id}" open><summary><h2>{heading}</h2><span class="count">{count}</span></summary>"#
    );
    if total == 0 {
        return;
    }
    h.push_str("<div class=\"scroll\"><table><thead><tr>");
    for column in columns {
        match column.strip_prefix('>') {
            Some(c) => {
                let _ = write!(h, r#"<th class="num">{c}</th>"#);
            }
            None => {
                let _ = write!(h, "<th>{column}</th>");
            }
        }
    }
    h.push_str("</tr></thead><tbody>");
}

pub(super) fn close_table(h: &mut String, what: &str, total: usize, shown: usize, order: &str) {
    if total == 0 {
        let _ = write!(h, r#"<p class="empty">No {what}.</p></details>"#);
        return;
    }
    h.push_str("</tbody></table></div>");
    if shown < total {
        let _ = write!(
            h,
            r#"<p class="more">Showing {shown} of {total} {what}, {order}. All of them: <a href="api/status">/api/status</a>.</p>"#
        );
    }
    h.push_str("</details>");
}

pub(super) fn na() -> &'static str {
    r#"<span class="na">–</span>"#
}

pub(super) fn or_na(value: Option<String>) -> String {
    value.unwrap_or_else(|| na().to_string())
}

/// A bar for a fraction, coloured by `warn_at` and `bad_at`.
pub(super) fn bar(ratio: f64, warn_at: f64, bad_at: f64) -> String {
    let clamped = if ratio.is_finite() {
        ratio.clamp(0.0, 1.0)
    } else {
        0.0
    };
    let class = if ratio >= bad_at {
        "bad"
    } else if ratio >= warn_at {
        "warn"
    } else {
        "ok"
    };
    format!(
        r#"<span class="bar {class}"><span style="width:{:.1}%"></span></span><span class="pct">{}</span>"#,
        clamped * 100.0,
        format::percent(ratio)
    )
}

pub(super) fn name(text: &str) -> String {
    escape(&truncate(text, MAX_NAME_CHARS))
}

/// A name cell that shows the full (bounded) text on hover.
pub(super) fn name_cell(text: &str, class: &str) -> String {
    if text.is_empty() {
        return format!(r#"<td class="{class}">{}</td>"#, na());
    }
    let full = escape(&truncate(text, MAX_TEXT_CHARS));
    format!(r#"<td class="{class}" title="{full}">{}</td>"#, name(text))
}
