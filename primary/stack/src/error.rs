//! Stack errors: the file, the line where known, the resource, the problem.

use std::fmt;

use super::limits::Limit;

/// What is wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Problem {
    /// The document does not parse, or has an unexpected shape.
    Syntax(String),
    /// Two resources share a label.
    DuplicateLabel,
    /// Two targets share a name.
    DuplicateTarget(String),
    /// The resource names a target the stack does not declare.
    UnknownTarget(String),
    /// The target names a plugin no satellite or embedded host announced.
    UnknownPlugin(String),
    /// The target's plugin could not be provided, for this reason.
    PluginUnavailable {
        /// The plugin.
        plugin: String,
        /// Why (names the plugin).
        reason: String,
    },
    /// The plugin does not announce the type.
    UnknownType {
        /// The type.
        resource_type: String,
        /// The plugin.
        plugin: String,
    },
    /// A required field is absent.
    MissingRequired(String),
    /// A property the type does not have.
    UnknownField {
        /// The field.
        field: String,
        /// The type.
        resource_type: String,
    },
    /// A reference to a resource that is not in the stack.
    UnknownResource(String),
    /// A reference to a property the referenced type does not have.
    UnknownProperty {
        /// The referenced resource.
        resource: String,
        /// The property.
        property: String,
    },
    /// Resources that depend on each other in a circle.
    Cycle(Vec<String>),
    /// A target name that cannot be a NATS subject token.
    BadTargetName(String),
    /// The document is longer, deeper, or expands (through its aliases)
    /// to more than the parser's limits allow (`stack::limits`). Nothing
    /// was built.
    TooLarge(Limit),
    /// A parameter has no value, or a value it does not accept. Secret
    /// values are never in the message.
    Parameter {
        /// The parameter.
        name: String,
        /// What is wrong.
        message: String,
    },
    /// A problem inside a module, placed in the module's file; the
    /// error around it is placed where the module is used.
    InModule {
        /// The module instance's address where it is used (`db["eu"]`).
        module: String,
        /// The problem, in the module's file.
        error: Box<StackError>,
    },
    /// The existing resource its `import:` names could not be read (it
    /// does not exist, or its plugin failed).
    Import {
        /// The identifier it names.
        native_id: String,
        /// Why (the plugin's code and message).
        message: String,
    },
    /// An expression has no value.
    Expression {
        /// Where it is (`property `path``, `variable `x``).
        at: String,
        /// Why.
        error: super::eval::EvalError,
    },
}

/// One problem in a stack document.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub struct StackError {
    /// The document.
    pub file: String,
    /// The line, where it could be found (1-based).
    pub line: Option<usize>,
    /// Where on the line, where known: filled by the parser for syntax
    /// errors, else by [`StackError::locate`] from the document's text.
    /// Boxed: errors travel in `Result`s and most have none.
    pub position: Option<Box<Position>>,
    /// The resource concerned.
    pub resource: Option<String>,
    /// What is wrong.
    pub problem: Problem,
}

/// Where on its line a [`StackError`] is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Position {
    /// The column (1-based, in characters).
    pub column: usize,
    /// The offending text as a byte range of the document.
    pub span: std::ops::Range<usize>,
}

impl StackError {
    /// `problem` of `resource` of `stack` (of the document, `None`): in
    /// the file and at the line that declares it, inside the chain of
    /// module uses that led there.
    pub fn of_resource(
        stack: &super::Stack,
        resource: Option<&super::ResourceDecl>,
        problem: Problem,
    ) -> StackError {
        let origin = resource.and_then(|r| r.origin.as_deref());
        let e = StackError {
            file: origin.map_or_else(|| stack.source.clone(), |o| o.file.clone()),
            line: resource.and_then(|r| r.line),
            position: None,
            resource: resource.map(|r| r.label.clone()),
            problem,
        };
        match origin {
            Some(o) => o.wrap(e),
            None => e,
        }
    }

    /// The column, where known.
    pub fn column(&self) -> Option<usize> {
        self.position.as_ref().map(|p| p.column)
    }

    /// The offending text's byte range in the document, where known.
    pub fn span(&self) -> Option<std::ops::Range<usize>> {
        self.position.as_ref().map(|p| p.span.clone())
    }
}

impl fmt::Display for StackError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file)?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
        }
        write!(f, ": ")?;
        if let Some(r) = &self.resource {
            write!(f, "resource `{r}`: ")?;
        }
        match &self.problem {
            Problem::Syntax(s) => write!(f, "{s}"),
            Problem::DuplicateLabel => write!(f, "label used by more than one resource"),
            Problem::DuplicateTarget(t) => write!(f, "target `{t}` declared more than once"),
            Problem::UnknownTarget(t) => write!(f, "unknown target `{t}`"),
            Problem::UnknownPlugin(p) => write!(
                f,
                "no plugin `{p}` is available (is a satellite serving it?)"
            ),
            Problem::PluginUnavailable { reason, .. } => write!(f, "{reason}"),
            Problem::UnknownType {
                resource_type,
                plugin,
            } => {
                write!(
                    f,
                    "unknown type `{resource_type}`: plugin `{plugin}` does not announce it"
                )
            }
            Problem::MissingRequired(field) => write!(f, "missing required field `{field}`"),
            Problem::UnknownField {
                field,
                resource_type,
            } => {
                write!(f, "unknown field `{field}` for type `{resource_type}`")
            }
            Problem::UnknownResource(r) => write!(
                f,
                "references resource `{r}`, which the stack does not declare"
            ),
            Problem::UnknownProperty { resource, property } => {
                write!(f, "references `{resource}.{property}`, but that resource's type has no property `{property}`")
            }
            Problem::Cycle(members) => write!(f, "dependency cycle: {}", members.join(" -> ")),
            Problem::BadTargetName(t) => {
                write!(f, "target name `{t}` must be letters, digits, `-` or `_` (it is a NATS subject token)")
            }
            Problem::TooLarge(limit) => write!(f, "{limit}"),
            Problem::Parameter { name, message } => write!(f, "parameter `{name}`: {message}"),
            Problem::Import { native_id, message } => {
                write!(f, "cannot import `{native_id}`: {message}")
            }
            Problem::Expression { at, error } => write!(f, "{at}: {error}"),
            Problem::InModule { module, error } => write!(f, "in module `{module}`: {error}"),
        }
    }
}
