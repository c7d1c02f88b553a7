//! Where in the document's text an error is: the line, the column and the
//! span of the offending key or value, found after the fact from the text
//! and the problem, so that the parser and the validator need only know
//! the resource's line.

use std::ops::Range;

use super::{Position, Problem, StackError};

/// Most errors of one document [`locate_all`] looks for: each look may
/// read the whole text, and a hostile document can have one error per
/// resource.
pub const MAX_LOCATED: usize = 100;

/// [`StackError::locate`] for the first [`MAX_LOCATED`] errors of the
/// document `text`; the others keep what they had.
pub fn locate_all(errors: Vec<StackError>, text: &str) -> Vec<StackError> {
    let lines = Lines::new(text);
    errors
        .into_iter()
        .enumerate()
        .map(|(i, e)| {
            if i < MAX_LOCATED {
                e.locate_in(&lines)
            } else {
                e
            }
        })
        .collect()
}

impl StackError {
    /// The error with its line, column and span filled from `text`, the
    /// document it names, where they can be found; what was already known
    /// stays. The line may become more precise (the offending property's
    /// rather than the resource's).
    pub fn locate(self, text: &str) -> StackError {
        self.locate_in(&Lines::new(text))
    }

    fn locate_in(mut self, lines: &Lines<'_>) -> StackError {
        if self.position.is_some() {
            return self;
        }
        let found = self.find(lines).or_else(|| {
            // At least the line's content, past its indentation.
            let line = lines.get(self.line?)?;
            Some(line.trimmed())
        });
        if let Some(span) = found {
            let (line, column) = lines.position(span.start);
            self.line = Some(line);
            self.position = Some(Box::new(Position { column, span }));
        }
        self
    }

    fn find(&self, lines: &Lines<'_>) -> Option<Range<usize>> {
        let base = self.resource.as_deref().map(|label| {
            // An instance (`web["a"]`) is declared by its declaration's label.
            label.split('[').next().unwrap_or(label)
        });
        // The resource's block, then (a label declared twice gives both
        // the first one's line) every other declaration of its label.
        let in_blocks = |find: &dyn Fn(Line<'_>) -> Option<Range<usize>>| {
            let first = self.line.and_then(|n| lines.block(n)?.find_map(find));
            first.or_else(|| {
                let base = base?;
                lines
                    .all()
                    .enumerate()
                    .filter(|(_, l)| l.value_of("label").is_some_and(|v| v.text == base))
                    .find_map(|(i, _)| lines.block(i + 1)?.find_map(find))
            })
        };
        let label = || {
            let base = base?;
            in_blocks(&|l| {
                l.value_of("label")
                    .filter(|v| v.text == base)
                    .map(|v| v.range)
            })
        };
        let key_in_block = |key: &str| in_blocks(&|l| l.key(key));
        let value_in_block = |key: &str, value: &str| {
            in_blocks(&|l| l.value_of(key).filter(|v| v.text == value).map(|v| v.range))
        };
        // An expression's value where it is on the key's line, else the key.
        let expression_at = |key: &str| {
            in_blocks(&|l| {
                let k = l.key(key)?;
                let v = l.value_of(key).filter(|v| !v.text.is_empty());
                Some(v.map_or(k, |v| v.range))
            })
        };
        let on_line = |key: &str| lines.get(self.line?)?.key(key);
        let span = match &self.problem {
            Problem::UnknownField { field, .. } => key_in_block(field),
            Problem::MissingRequired(_) => key_in_block("properties"),
            Problem::UnknownTarget(target) => value_in_block("target", target),
            Problem::UnknownType { resource_type, .. } => value_in_block("type", resource_type),
            Problem::UnknownResource(r) => in_blocks(&|l| l.reference(r, None)),
            Problem::UnknownProperty { resource, property } => {
                in_blocks(&|l| l.reference(resource, Some(property)))
            }
            Problem::DuplicateLabel => {
                let label = self.resource.as_deref()?;
                // The first declaration is the one kept: point at the next.
                lines
                    .all()
                    .filter_map(|l| l.value_of("label").filter(|v| v.text == label))
                    .nth(1)
                    .map(|v| v.range)
            }
            Problem::DuplicateTarget(name) => lines
                .all()
                .filter_map(|l| l.value_of("name").filter(|v| v.text == name))
                .nth(1)
                .map(|v| v.range),
            Problem::BadTargetName(name) => lines
                .all()
                .find_map(|l| l.value_of("name").filter(|v| v.text == name))
                .map(|v| v.range),
            Problem::UnknownPlugin(plugin) | Problem::PluginUnavailable { plugin, .. } => lines
                .all()
                .find_map(|l| l.value_of("plugin").filter(|v| v.text == plugin))
                .map(|v| v.range),
            Problem::Parameter { name, .. } => on_line(name),
            Problem::Import { .. } => in_blocks(&|l| l.value_of("import").map(|v| v.range)),
            // The use's line; the inner error is placed in its own file.
            Problem::InModule { .. } => None,
            Problem::Expression { at, .. } => {
                let name = between_backticks(at);
                match name {
                    Some(name) if self.resource.is_some() => expression_at(name),
                    Some(name) => on_line(name),
                    None => None,
                }
            }
            Problem::Syntax(message) => {
                let (line, column) = parser_position(message)?;
                let line = lines.get(line)?;
                let at = line.text.char_indices().nth(column.checked_sub(1)?);
                let from = at.map_or(line.text.len(), |(i, _)| i);
                let len = at.map_or(0, |(_, c)| c.len_utf8());
                Some(line.start + from..line.start + from + len)
            }
            Problem::TooLarge(_) | Problem::Cycle(_) => None,
        };
        span.or_else(label)
    }
}

/// The `at line N column M` the YAML parsers end their messages with.
fn parser_position(message: &str) -> Option<(usize, usize)> {
    let (_, at) = message.rsplit_once(" at line ")?;
    let (line, column) = at.split_once(" column ")?;
    let digits = |s: &str| {
        s.chars()
            .take_while(char::is_ascii_digit)
            .collect::<String>()
    };
    Some((digits(line).parse().ok()?, digits(column).parse().ok()?))
}

/// The first `` `name` `` in `at`, e.g. `path` in ``property `path` ``.
fn between_backticks(at: &str) -> Option<&str> {
    let (_, rest) = at.split_once('`')?;
    let (name, _) = rest.split_once('`')?;
    Some(name)
}

/// The document's lines with their byte offsets.
struct Lines<'a> {
    text: &'a str,
    starts: Vec<usize>,
}

impl<'a> Lines<'a> {
    fn new(text: &'a str) -> Lines<'a> {
        let mut starts = vec![0];
        starts.extend(text.match_indices('\n').map(|(i, _)| i + 1));
        Lines { text, starts }
    }

    /// Line `n` (1-based).
    fn get(&self, n: usize) -> Option<Line<'a>> {
        let start = *self.starts.get(n.checked_sub(1)?)?;
        let end = self.starts.get(n).map_or(self.text.len(), |next| next - 1);
        let text = self.text.get(start..end)?;
        Some(Line {
            text: text.strip_suffix('\r').unwrap_or(text),
            start,
        })
    }

    fn all(&self) -> impl Iterator<Item = Line<'a>> + '_ {
        (1..=self.starts.len()).filter_map(|n| self.get(n))
    }

    /// The 1-based line and character column of byte `at`.
    fn position(&self, at: usize) -> (usize, usize) {
        let line = self.starts.partition_point(|s| *s <= at).max(1);
        let start = self.starts[line - 1];
        let column = self
            .text
            .get(start..at)
            .map_or(1, |t| t.chars().count() + 1);
        (line, column)
    }

    /// The YAML list item that line `n` belongs to: from its `- ` to the
    /// next line indented no deeper than that dash (at most line `n` alone
    /// when the text is not laid out as a block list, e.g. JSON on a line).
    fn block(&self, n: usize) -> Option<impl Iterator<Item = Line<'a>> + '_> {
        let at = self.get(n)?;
        let mut first = n;
        let mut dash = None;
        for i in (1..=n).rev() {
            let l = self.get(i)?;
            if l.blank() {
                continue;
            }
            if l.body().starts_with("- ") && (i == n || l.indent() < at.indent()) {
                first = i;
                dash = Some(l.indent());
                break;
            }
            if l.indent() < at.indent() {
                break;
            }
        }
        let end = match dash {
            Some(indent) => (first + 1..=self.starts.len())
                .find(|i| {
                    self.get(*i)
                        .is_some_and(|l| !l.blank() && l.indent() <= indent)
                })
                .unwrap_or(self.starts.len() + 1),
            None => n + 1,
        };
        Some((first..end).filter_map(|i| self.get(i)))
    }
}

/// One line of the document.
#[derive(Clone, Copy)]
struct Line<'a> {
    text: &'a str,
    /// Its byte offset in the document.
    start: usize,
}

/// A scalar on a line and where it is.
struct Found<'a> {
    text: &'a str,
    range: Range<usize>,
}

impl<'a> Line<'a> {
    fn indent(&self) -> usize {
        self.text.len() - self.text.trim_start().len()
    }

    fn blank(&self) -> bool {
        let t = self.text.trim_start();
        t.is_empty() || t.starts_with('#')
    }

    /// The line past its indentation.
    fn body(&self) -> &'a str {
        self.text.trim_start()
    }

    /// The line's content, without its indentation and trailing space.
    fn trimmed(&self) -> Range<usize> {
        let from = self.start + self.indent();
        from..from + self.body().trim_end().len()
    }

    /// `key` where the line has it as a mapping key (`key:`, `- key:`,
    /// `"key":`), including within a flow map (`{ key: … }`).
    fn key(&self, key: &str) -> Option<Range<usize>> {
        let mut from = 0;
        while let Some(i) = self.text[from..].find(key).map(|i| i + from) {
            from = i + key.len();
            let before = self.text[..i].trim_end_matches(['"', '\'']);
            let after = self.text[i + key.len()..].trim_start_matches(['"', '\'']);
            let starts = before
                .chars()
                .next_back()
                .is_none_or(|c| matches!(c, ' ' | '-' | '{' | ',' | '\t'));
            if starts && after.starts_with(':') {
                return Some(self.start + i..self.start + i + key.len());
            }
        }
        None
    }

    /// The scalar value of `key` on the line, unquoted.
    fn value_of(&self, key: &str) -> Option<Found<'a>> {
        let k = self.key(key)?;
        let rest_at = k.end - self.start;
        let rest = &self.text[rest_at..];
        let colon = rest.find(':')? + 1;
        let value = &rest[colon..];
        let lead = value.len() - value.trim_start().len();
        let value = value.trim_start();
        let (text, skip) = match value.chars().next() {
            Some(q @ ('"' | '\'')) => (value[1..].split(q).next()?, 1),
            _ => (
                value
                    .split([',', '}', '#'])
                    .next()
                    .unwrap_or(value)
                    .trim_end(),
                0,
            ),
        };
        let from = self.start + rest_at + colon + lead + skip;
        Some(Found {
            text,
            range: from..from + text.len(),
        })
    }

    /// A reference to `resource` (`.property` when given) inside `${…}`.
    fn reference(&self, resource: &str, property: Option<&str>) -> Option<Range<usize>> {
        let open = self.text.find("${")?;
        let mut from = open;
        while let Some(i) = self.text[from..].find(resource).map(|i| i + from) {
            from = i + resource.len();
            let before = self.text[..i].chars().next_back();
            if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') {
                continue;
            }
            let after = &self.text[i + resource.len()..];
            let end = match property {
                Some(p) => match after.strip_prefix('.').filter(|a| a.starts_with(p)) {
                    Some(_) => i + resource.len() + 1 + p.len(),
                    None => continue,
                },
                None if after.starts_with(['.', '[']) => i + resource.len(),
                None => continue,
            };
            return Some(self.start + i..self.start + end);
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(line: usize, resource: Option<&str>, problem: Problem) -> StackError {
        StackError {
            file: "s.yaml".into(),
            line: Some(line),
            position: None,
            resource: resource.map(Into::into),
            problem,
        }
    }

    const DOC: &str = "stack: s\ntargets:\n  - name: home\n    plugin: nope\nresources:\n  - label: app\n    type: Local::Fs::Directory\n    target: home\n    properties:\n      path: app\n      colour: blue\n  - label: readme\n    type: Local::Fs::File\n    target: away\n    properties: { path: \"${app.nope}/README\" }\n";

    fn at(e: StackError) -> (usize, usize, &'static str) {
        (
            e.line.unwrap(),
            e.column().unwrap(),
            &DOC[e.span().unwrap()],
        )
    }

    #[test]
    fn an_unknown_field_points_at_its_key() {
        let e = err(
            6,
            Some("app"),
            Problem::UnknownField {
                field: "colour".into(),
                resource_type: "T".into(),
            },
        );
        assert_eq!(at(e.locate(DOC)), (11, 7, "colour"));
    }

    #[test]
    fn a_field_is_looked_for_in_its_own_resource_only() {
        // `path` is a key of `app` too; the second resource's is meant.
        let e = err(
            12,
            Some("readme"),
            Problem::Expression {
                at: "property `path`".into(),
                error: super::super::EvalError::Syntax("x".into()),
            },
        );
        assert_eq!(at(e.locate(DOC)), (15, 26, "${app.nope}/README"));
    }

    #[test]
    fn values_and_references_are_pointed_at() {
        let e = err(12, Some("readme"), Problem::UnknownTarget("away".into()));
        assert_eq!(at(e.locate(DOC)), (14, 13, "away"));
        let e = err(
            12,
            Some("readme"),
            Problem::UnknownProperty {
                resource: "app".into(),
                property: "nope".into(),
            },
        );
        assert_eq!(at(e.locate(DOC)), (15, 28, "app.nope"));
        let e = err(
            6,
            Some("app"),
            Problem::UnknownType {
                resource_type: "Local::Fs::Directory".into(),
                plugin: "p".into(),
            },
        );
        assert_eq!(at(e.locate(DOC)), (7, 11, "Local::Fs::Directory"));
    }

    #[test]
    fn a_label_declared_twice_is_looked_for_in_both_declarations() {
        let text = "resources:\n  - label: a\n    type: T\n  - label: a\n    type: U\n";
        let e = err(
            2,
            Some("a"),
            Problem::UnknownType {
                resource_type: "U".into(),
                plugin: "p".into(),
            },
        )
        .locate(text);
        assert_eq!((e.line, e.column()), (Some(5), Some(11)));
        let e = err(2, Some("a"), Problem::DuplicateLabel).locate(text);
        assert_eq!((e.line, e.column()), (Some(4), Some(12)));
    }

    #[test]
    fn errors_without_a_line_are_found_by_name() {
        let mut e = err(1, None, Problem::UnknownPlugin("nope".into()));
        e.line = None;
        assert_eq!(at(e.locate(DOC)), (4, 13, "nope"));
    }

    #[test]
    fn otherwise_the_label_or_the_line_is() {
        let e = err(6, Some("app"), Problem::Cycle(vec!["app".into()]));
        assert_eq!(at(e.locate(DOC)), (6, 12, "app"));
        let e = err(2, None, Problem::Syntax("x".into()));
        assert_eq!(at(e.locate(DOC)), (2, 1, "targets:"));
        let e = err(3, None, Problem::Syntax("bad at line 7 column 9".into()));
        assert_eq!(at(e.locate(DOC)), (7, 9, ":"));
    }

    #[test]
    fn nothing_is_invented_for_lines_past_the_end_or_hostile_text() {
        let e = err(99, None, Problem::Syntax("x".into())).locate(DOC);
        assert_eq!((e.line, e.position), (Some(99), None));
        let text = "\u{1F600}- label: \"\n\r\n";
        let e = err(1, Some("x"), Problem::DuplicateLabel).locate(text);
        assert_eq!(e.column(), Some(1));
        assert_eq!(&text[e.span().unwrap()], "\u{1F600}- label: \"");
    }
}
