//! Stack errors as a compiler prints them: the message, `file:line:column`,
//! the offending line of the document and a caret under what is wrong.

use std::io::IsTerminal;
use std::ops::Range;

use codespan_reporting::diagnostic::{Diagnostic, Label};
use codespan_reporting::files::{Error as FilesError, Files};
use codespan_reporting::term::{self, termcolor, Chars, Config, Styles, StylesWriter};
use orrery_primary::service::ServiceError;
use orrery_primary::stack::{Problem, StackError};

/// Characters of the offending line shown either side of the caret: a
/// document may be one long line (JSON, an alias bomb).
const CONTEXT_CHARS: usize = 60;
/// Longest underline; past it the line is cut after this many characters.
const MAX_UNDERLINE: usize = 120;

/// Whether diagnostics on stderr are coloured: stderr is a terminal and
/// `NO_COLOR` (https://no-color.org) is unset or empty.
pub fn colour() -> bool {
    std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

/// How `error` is printed when a command fails: stack errors rendered
/// against their documents (read again from disk), anything else as
/// `error: …`. `None` when the error is not about a stack document.
pub fn stack_errors(error: &anyhow::Error, colour: bool) -> Option<String> {
    let errors: Vec<StackError> = match error.downcast_ref::<ServiceError>() {
        Some(ServiceError::InvalidStack(errors)) => errors.clone(),
        _ => vec![error.downcast_ref::<StackError>()?.clone()],
    };
    Some(render_all(
        &errors,
        &|file| std::fs::read_to_string(file).ok(),
        colour,
    ))
}

/// Every error rendered, then one line saying that nothing was changed.
/// `read` gives the text of the document an error names.
pub fn render_all(
    errors: &[StackError],
    read: &dyn Fn(&str) -> Option<String>,
    colour: bool,
) -> String {
    let mut texts: Vec<(String, Option<String>)> = Vec::new();
    let mut out = String::new();
    for outer in errors {
        // An error inside a module is shown where it is, in the module's
        // file, followed by the chain of uses that led there.
        let mut e = outer;
        let mut uses = Vec::new();
        while let Problem::InModule { module, error } = &e.problem {
            uses.push(match e.line {
                Some(line) => format!("  = in module `{module}`, used at {}:{line}\n", e.file),
                None => format!("  = in module `{module}`, used in {}\n", e.file),
            });
            e = error;
        }
        if !texts.iter().any(|(f, _)| *f == e.file) {
            texts.push((e.file.clone(), read(&e.file)));
        }
        let text = texts
            .iter()
            .find(|(f, _)| *f == e.file)
            .and_then(|(_, t)| t.as_deref());
        out.push_str(&render(e, text, colour));
        for used in uses.iter().rev() {
            out.push_str(used);
        }
    }
    let problems = match errors.len() {
        1 => "1 problem".to_owned(),
        n => format!("{n} problems"),
    };
    out.push_str(&format!(
        "error: the stack is invalid ({problems}); nothing was changed\n"
    ));
    out
}

/// One error. With the document's `text` and a known position: the
/// message, `--> file:line:column`, the line and a caret; without, the
/// one-line form (`error: file:line: …`).
pub fn render(e: &StackError, text: Option<&str>, colour: bool) -> String {
    let message = message(e);
    let window = text.and_then(|t| Window::of(e, t));
    let Some(window) = window else {
        return format!("error: {e}\n");
    };
    let diagnostic = Diagnostic::error()
        .with_message(message)
        .with_label(Label::primary((), window.span.clone()));
    let config = Config {
        chars: Chars::ascii(),
        ..Config::default()
    };
    let rendered = if colour {
        let styles = Styles::default();
        let mut buffer = termcolor::Buffer::ansi();
        term::emit_to_write_style(
            &mut StylesWriter::new(&mut buffer, &styles),
            &config,
            &window,
            &diagnostic,
        )
        .ok()
        .map(|()| String::from_utf8_lossy(buffer.as_slice()).into_owned())
    } else {
        term::emit_into_string(&config, &window, &diagnostic).ok()
    };
    rendered.unwrap_or_else(|| format!("error: {e}\n"))
}

/// The error's own words: its display without the location, and without
/// the parser's ` at line N column M` (the position is printed apart).
fn message(e: &StackError) -> String {
    let bare = StackError {
        file: String::new(),
        line: None,
        position: None,
        ..e.clone()
    }
    .to_string();
    let bare = bare.strip_prefix(": ").unwrap_or(&bare).to_owned();
    match (bare.rfind(" at line "), e.column()) {
        (Some(i), Some(_)) if bare[i..].contains(" column ") => bare[..i].to_owned(),
        _ => bare,
    }
}

/// The part of the offending line shown, as a one-line "file" for the
/// renderer, which takes the real line and column numbers from it.
struct Window {
    name: String,
    line: usize,
    /// The column of the window's first character.
    first_column: usize,
    text: String,
    /// The underline, within `text`.
    span: Range<usize>,
}

impl Window {
    fn of(e: &StackError, text: &str) -> Option<Window> {
        let span = e.span()?;
        let line_no = e.line?;
        let start = span.start.min(text.len());
        let line_start = text[..start].rfind('\n').map_or(0, |i| i + 1);
        let line_end = text[start..].find('\n').map_or(text.len(), |i| start + i);
        let line = text.get(line_start..line_end)?;
        let line = line.strip_suffix('\r').unwrap_or(line);
        let (s, e_) = (
            start - line_start,
            span.end.clamp(start, line_end) - line_start,
        );
        let s = s.min(line.len());
        let e_ = e_.min(line.len());
        // Cut to whole characters around the underline.
        let before: Vec<(usize, char)> = line[..s].char_indices().collect();
        let from = before
            .len()
            .checked_sub(CONTEXT_CHARS)
            .map_or(0, |i| before[i].0);
        let underline_end = line[s..e_]
            .char_indices()
            .nth(MAX_UNDERLINE)
            .map_or(e_, |(i, _)| s + i);
        let to = line[underline_end..]
            .char_indices()
            .nth(CONTEXT_CHARS)
            .map_or(line.len(), |(i, _)| underline_end + i);
        let lead = if from > 0 { "…" } else { "" };
        let tail = if to < line.len() { "…" } else { "" };
        let shown = format!("{lead}{}{tail}", &line[from..to]);
        let offset = lead.len() + s - from;
        Some(Window {
            name: e.file.clone(),
            line: line_no,
            first_column: line[..from].chars().count() + 1 - lead.chars().count(),
            span: offset..offset + (underline_end - s),
            text: shown,
        })
    }
}

impl<'a> Files<'a> for Window {
    type FileId = ();
    type Name = &'a str;
    type Source = &'a str;

    fn name(&'a self, (): ()) -> Result<&'a str, FilesError> {
        Ok(&self.name)
    }

    fn source(&'a self, (): ()) -> Result<&'a str, FilesError> {
        Ok(&self.text)
    }

    fn line_index(&'a self, (): (), _byte: usize) -> Result<usize, FilesError> {
        Ok(0)
    }

    fn line_number(&'a self, (): (), _line: usize) -> Result<usize, FilesError> {
        Ok(self.line)
    }

    fn column_number(&'a self, (): (), _line: usize, byte: usize) -> Result<usize, FilesError> {
        let before = self
            .text
            .get(..byte)
            .ok_or(FilesError::InvalidCharBoundary { given: byte })?;
        Ok(self.first_column + before.chars().count())
    }

    fn line_range(&'a self, (): (), line: usize) -> Result<Range<usize>, FilesError> {
        match line {
            0 => Ok(0..self.text.len()),
            _ => Ok(self.text.len()..self.text.len()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use orrery_primary::stack::{Position, Problem};

    fn err(text: &str, line: usize, resource: Option<&str>, problem: Problem) -> StackError {
        StackError {
            file: "bad.yaml".into(),
            line: Some(line),
            position: None,
            resource: resource.map(Into::into),
            problem,
        }
        .locate(text)
    }

    #[test]
    fn an_error_shows_its_line_and_a_caret() {
        let text = "stack: s\nresources:\n  - label: app\n    type: T\n    properties: { path: a, colour: blue }\n";
        let e = err(
            text,
            3,
            Some("app"),
            Problem::UnknownField {
                field: "colour".into(),
                resource_type: "T".into(),
            },
        );
        assert_eq!(
            render(&e, Some(text), false),
            "error: resource `app`: unknown field `colour` for type `T`\n  --> bad.yaml:5:28\n  |\n5 |     properties: { path: a, colour: blue }\n  |                            ^^^^^^\n\n"
        );
        let coloured = render(&e, Some(text), true);
        assert!(coloured.contains("\x1b["), "{coloured:?}");
    }

    #[test]
    fn a_long_line_is_cut_around_the_caret() {
        let text = format!("stack: s\nx: [{}, *nope]\n", "a, ".repeat(10_000));
        let at = text.find("*nope").unwrap();
        let e = StackError {
            file: "long.yaml".into(),
            line: Some(2),
            position: Some(Box::new(Position {
                column: 30_007,
                span: at..at + 5,
            })),
            resource: None,
            problem: Problem::Syntax("unknown anchor".into()),
        };
        let out = render(&e, Some(&text), false);
        assert!(out.len() < 600, "{out}");
        assert!(out.contains("--> long.yaml:2:30007"), "{out}");
        assert!(out.contains("a, a, , *nope]"), "{out}");
    }

    #[test]
    fn without_the_document_the_one_line_form_is_printed() {
        let e = StackError {
            file: "gone.yaml".into(),
            line: Some(4),
            position: None,
            resource: None,
            problem: Problem::Syntax("bad".into()),
        };
        assert_eq!(
            render_all(&[e], &|_| None, false),
            "error: gone.yaml:4: bad\nerror: the stack is invalid (1 problem); nothing was changed\n"
        );
    }
}
