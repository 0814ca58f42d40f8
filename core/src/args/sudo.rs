//! The `sudo` argument: a header the server may send, never a parameter of the operation.
//!
//! Only offered with `SUDO_ALLOWED_USERS` set (the catalog adds it to the schemas), it leaves
//! the arguments before they are checked (`take`), and a query parameter of that name is
//! never sent, since the forges read `?sudo=` as "act as this user" unchecked. Whether the
//! caller may act as the login is decided by the server once the caller is known.

use std::collections::BTreeSet;

use serde_json::{Map, Value};

use crate::catalog::{Catalog, Target};
use crate::error::{CallError, ErrorKind, Shown};
use crate::identity::{MAX_LOGIN_CHARS, SUDO_ARGUMENT as ARGUMENT, is_login};

/// `SUDO_ALLOWED_USERS`: who calls may act as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Allowed {
    /// `*`: any user.
    Any,
    /// These logins, lower-case (the forges match logins regardless of letter case).
    Logins(BTreeSet<String>),
}

impl Allowed {
    /// Parse the setting: comma-separated logins, or `*` alone. Nothing but commas and white
    /// space is no setting at all.
    pub fn parse(text: &str) -> Result<Option<Allowed>, Shown> {
        let entries: Vec<&str> = text.split(',').map(str::trim).filter(|e| !e.is_empty()).collect();
        if entries.is_empty() {
            return Ok(None);
        }
        if entries.contains(&"*") {
            if entries.len() > 1 {
                return Err("`*` allows any user: give it alone, or list logins without it".into());
            }
            return Ok(Some(Allowed::Any));
        }
        if let Some(bad) = entries.iter().find(|e| !is_login(e)) {
            return Err(format!(
                "{bad:?} is not a login (letters, digits, '-', '_' and '.'; at most {MAX_LOGIN_CHARS} characters)"
            ));
        }
        Ok(Some(Allowed::Logins(entries.iter().map(|e| e.to_lowercase()).collect())))
    }

    /// Whether calls may act as `login`.
    pub fn lists(&self, login: &str) -> bool {
        match self {
            Allowed::Any => true,
            Allowed::Logins(logins) => logins.contains(&login.to_lowercase()),
        }
    }
}

/// Why a query parameter named `sudo` is never sent: the forges read `?sudo=` as "act as
/// this user" (in any spec, whatever it calls the parameter), and only the `sudo` argument,
/// which the server judges, may ask that.
pub(crate) fn query_refusal() -> CallError {
    CallError::local(
        ErrorKind::Denied,
        "a query parameter `sudo` is never sent: the forge would act as that user unchecked; acting as another user goes only through the tool's own `sudo` argument (see SUDO_ALLOWED_USERS)",
    )
}

/// Whether a query parameter name is the forges' `sudo` (matched in any letter case, to be safe).
pub(crate) fn is_query_sudo(name: &str) -> bool {
    name.eq_ignore_ascii_case(ARGUMENT)
}

/// The `sudo` a call asked for, taken out of its arguments: the tool's own, and for the call
/// tool also the one inside `arguments`, where the operation's schema shows it.
#[derive(Debug, Default)]
pub struct Requested {
    own: Option<Value>,
    inner: Option<Value>,
}

impl Requested {
    /// The login asked for, if any: given once (or twice alike) and a login the forges accept.
    pub fn login(self) -> Result<Option<String>, CallError> {
        let value = match (self.own, self.inner) {
            (None, None) => return Ok(None),
            (Some(a), Some(b)) if a != b => {
                return Err(CallError::invalid_argument(
                    "/sudo",
                    "`sudo` is given twice with different values (beside `arguments` and inside it); give it once",
                ));
            }
            (Some(v), _) | (None, Some(v)) => v,
        };
        match value {
            Value::String(login) if is_login(&login) => Ok(Some(login)),
            _ => Err(CallError::invalid_argument(
                "/sudo",
                format!(
                    "`sudo` must be a login: letters, digits, '-', '_' and '.', at most {MAX_LOGIN_CHARS} characters"
                ),
            )),
        }
    }
}

/// Take `sudo` out of the arguments of tool `name`, when the tool offers it (which it does
/// only with `SUDO_ALLOWED_USERS` set). Anything else is left for the schema to judge.
pub fn take(catalog: &Catalog, name: &str, args: &mut Map<String, Value>) -> Requested {
    let Some(tool) = catalog.get(name).filter(|t| t.offers_sudo) else {
        return Requested::default();
    };
    let own = args.remove(ARGUMENT);
    let inner = match tool.target {
        Target::CallOperation => {
            let target = args.get("operation_id").and_then(Value::as_str).and_then(|id| catalog.get(id));
            match (target.is_some_and(|t| t.offers_sudo), args.get_mut("arguments")) {
                (true, Some(Value::Object(a))) => a.remove(ARGUMENT),
                _ => None,
            }
        }
        _ => None,
    };
    Requested { own, inner }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_setting_lists_logins_in_any_case_or_anyone() {
        let a = Allowed::parse(" Bob, carol ,,").unwrap().unwrap();
        assert!(a.lists("bob") && a.lists("BOB") && a.lists("Carol"));
        assert!(!a.lists("alice") && !a.lists("bo"));
        assert_eq!(Allowed::parse("*").unwrap(), Some(Allowed::Any));
        assert!(Allowed::parse(" * ").unwrap().unwrap().lists("anyone"));
        assert_eq!(Allowed::parse(" , ").unwrap(), None);
        assert!(Allowed::parse("*,bob").unwrap_err().contains("alone"));
        assert!(Allowed::parse("bob smith").unwrap_err().contains("not a login"));
    }
}
