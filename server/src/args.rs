//! Tool arguments: read from JSON with a clear error naming the argument and what it allows.

use serde_json::{Map, Value};

/// A tool call that cannot be answered as asked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ToolError {
    /// An argument is missing, of the wrong type, or out of range.
    #[error("argument `{argument}`: {message}")]
    Argument {
        /// The argument's name.
        argument: String,
        /// What is wrong and what is allowed.
        message: String,
    },
    /// The call is well formed but cannot be served (store trouble, a failed task).
    #[error("{0}")]
    Unavailable(String),
    /// No tool has this name.
    #[error("unknown tool {0:?}; tools: search, scan, fetch, read_span, related, index_stats")]
    UnknownTool(String),
}

impl ToolError {
    pub(crate) fn arg(argument: &str, message: impl Into<String>) -> Self {
        ToolError::Argument { argument: argument.to_string(), message: message.into() }
    }
}

/// A tool call's arguments from a JSON object built by a caller that has every argument at
/// hand (the command line): nulls and empty lists are arguments not given, and are left out.
pub fn tool_args(value: Value) -> Map<String, Value> {
    let Value::Object(map) = value else { return Map::new() };
    map.into_iter()
        .filter(|(_, v)| !v.is_null() && v.as_array().is_none_or(|a| !a.is_empty()))
        .collect()
}

/// The arguments of one call, checked as they are read.
#[derive(Debug)]
pub struct Args<'a> {
    map: &'a Map<String, Value>,
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

impl<'a> Args<'a> {
    /// Wraps the arguments, refusing any name not in `allowed`.
    pub fn new(map: &'a Map<String, Value>, allowed: &[&str]) -> Result<Self, ToolError> {
        for k in map.keys() {
            if !allowed.contains(&k.as_str()) {
                return Err(ToolError::arg(
                    k,
                    format!("unknown argument; allowed: {}", allowed.join(", ")),
                ));
            }
        }
        Ok(Args { map })
    }

    fn get(&self, name: &str) -> Option<&'a Value> {
        self.map.get(name).filter(|v| !v.is_null())
    }

    /// A string argument, if given.
    pub fn string(&self, name: &str) -> Result<Option<String>, ToolError> {
        match self.get(name) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(v) => Err(ToolError::arg(name, format!("must be a string, got {}", kind(v)))),
        }
    }

    /// A string argument that must be present and not blank, at most `max` chars.
    pub fn required_text(&self, name: &str, max: usize) -> Result<String, ToolError> {
        let s = self.string(name)?.ok_or_else(|| ToolError::arg(name, "is required"))?;
        if s.trim().is_empty() {
            return Err(ToolError::arg(name, "must not be empty"));
        }
        if s.chars().count() > max {
            return Err(ToolError::arg(
                name,
                format!("must be at most {max} characters, got {}", s.chars().count()),
            ));
        }
        Ok(s)
    }

    /// An integer in `min..=max`, `default` when absent.
    pub fn int_in(&self, name: &str, min: i64, max: i64, default: i64) -> Result<i64, ToolError> {
        let range = || format!("must be an integer from {min} to {max}");
        match self.get(name) {
            None => Ok(default),
            Some(Value::Number(n)) => match n.as_i64() {
                Some(i) if (min..=max).contains(&i) => Ok(i),
                _ => Err(ToolError::arg(name, format!("{}, got {n}", range()))),
            },
            Some(v) => Err(ToolError::arg(name, format!("{}, got {}", range(), kind(v)))),
        }
    }

    /// A boolean, `default` when absent.
    pub fn boolean(&self, name: &str, default: bool) -> Result<bool, ToolError> {
        match self.get(name) {
            None => Ok(default),
            Some(Value::Bool(b)) => Ok(*b),
            Some(v) => Err(ToolError::arg(name, format!("must be true or false, got {}", kind(v)))),
        }
    }

    /// One of `allowed`, `default` when absent.
    pub fn one_of(&self, name: &str, allowed: &[&str], default: &str) -> Result<String, ToolError> {
        let choices: Vec<(&str, &str)> = allowed.iter().map(|a| (*a, *a)).collect();
        self.choice(name, &choices, default).map(str::to_string)
    }

    /// The value of one of `choices`, given by its name (`default` when absent); any other
    /// value is an error naming the argument and every name it takes.
    pub fn choice<T: Copy>(
        &self,
        name: &str,
        choices: &[(&str, T)],
        default: T,
    ) -> Result<T, ToolError> {
        let msg = |got: String| {
            let names: Vec<&str> = choices.iter().map(|(n, _)| *n).collect();
            format!("must be one of {}, got {got}", names.join(", "))
        };
        match self.get(name) {
            None => Ok(default),
            Some(Value::String(s)) => choices
                .iter()
                .find(|(n, _)| *n == s.as_str())
                .map(|(_, value)| *value)
                .ok_or_else(|| ToolError::arg(name, msg(format!("{s:?}")))),
            Some(v) => Err(ToolError::arg(name, msg(kind(v).to_string()))),
        }
    }

    /// A string or a list of strings (empty when absent).
    pub fn string_list(&self, name: &str) -> Result<Vec<String>, ToolError> {
        match self.get(name) {
            None => Ok(Vec::new()),
            Some(Value::String(s)) => Ok(vec![s.clone()]),
            Some(Value::Array(items)) => items
                .iter()
                .map(|v| match v {
                    Value::String(s) => Ok(s.clone()),
                    v => Err(ToolError::arg(
                        name,
                        format!(
                            "must be a string or a list of strings, got a list holding {}",
                            kind(v)
                        ),
                    )),
                })
                .collect(),
            Some(v) => Err(ToolError::arg(
                name,
                format!("must be a string or a list of strings, got {}", kind(v)),
            )),
        }
    }
}

/// A cursor as a tool gives it out: its JSON, base64url without padding.
pub(crate) fn encode_cursor<T: serde::Serialize>(cursor: &T) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .encode(serde_json::to_vec(cursor).expect("a cursor serializes"))
}

/// A cursor `tool` gave out, read back; anything else is an error naming `cursor`.
pub(crate) fn decode_cursor<T: serde::de::DeserializeOwned>(
    s: &str,
    tool: &str,
) -> Result<T, ToolError> {
    use base64::Engine as _;
    let bad = || {
        ToolError::arg(
            "cursor",
            format!(
                "is not a cursor this server gave out; pass the `cursor` of a previous {tool} answer as is"
            ),
        )
    };
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(s).map_err(|_| bad())?;
    serde_json::from_slice(&bytes).map_err(|_| bad())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn args(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn unknown_arguments_are_named_with_the_allowed_ones() {
        let m = args(json!({"qury": "x"}));
        let err = Args::new(&m, &["query", "top_k"]).unwrap_err().to_string();
        assert_eq!(err, "argument `qury`: unknown argument; allowed: query, top_k");
    }

    #[test]
    fn integers_out_of_range_name_the_range() {
        let m = args(json!({"top_k": 500, "b": "7", "c": 2.5}));
        let a = Args::new(&m, &["top_k", "b", "c"]).unwrap();
        assert_eq!(
            a.int_in("top_k", 1, 50, 10).unwrap_err().to_string(),
            "argument `top_k`: must be an integer from 1 to 50, got 500"
        );
        assert!(a.int_in("b", 1, 50, 10).unwrap_err().to_string().contains("got a string"));
        assert!(a.int_in("c", 1, 50, 10).unwrap_err().to_string().contains("got 2.5"));
        assert_eq!(a.int_in("missing", 1, 50, 10).unwrap(), 10);
    }

    #[test]
    fn enums_name_their_values() {
        let m = args(json!({"fusion": "best"}));
        let a = Args::new(&m, &["fusion"]).unwrap();
        assert_eq!(
            a.one_of("fusion", &["rrf", "dense_only"], "rrf").unwrap_err().to_string(),
            "argument `fusion`: must be one of rrf, dense_only, got \"best\""
        );
        // A choice gives the value of the name given, the default when absent, and refuses
        // an unknown name rather than falling back to the default.
        let choices = [("rrf", 1), ("dense_only", 2)];
        assert_eq!(
            a.choice("fusion", &choices, 1).unwrap_err().to_string(),
            "argument `fusion`: must be one of rrf, dense_only, got \"best\""
        );
        assert_eq!(a.choice("sort", &choices, 1).unwrap(), 1);
        let m = args(json!({"fusion": "dense_only"}));
        assert_eq!(Args::new(&m, &["fusion"]).unwrap().choice("fusion", &choices, 1).unwrap(), 2);
    }

    #[test]
    fn empty_text_is_refused() {
        let m = args(json!({"query": "   "}));
        let a = Args::new(&m, &["query"]).unwrap();
        assert_eq!(
            a.required_text("query", 10).unwrap_err().to_string(),
            "argument `query`: must not be empty"
        );
    }
}
