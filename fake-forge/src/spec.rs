//! Reads the embedded Swagger specs into operations and a router.
//!
//! The specs are the single source of truth for what the fake routes: every (method, path) of
//! the flavor's spec becomes a route, so a client generated from the same spec can reach every
//! operation. Which parameter of a route is a catch-all comes from the fake's own table
//! ([`crate::catch_all`]), never from the server under test. Parsing happens once per flavor per
//! process ([`api`] caches it).

use std::collections::HashMap;
use std::sync::OnceLock;

use serde_json::Value;

use crate::Flavor;
use crate::catch_all;
use crate::fallback::Fallback;
use crate::router::{Router, Template};
use crate::util::resolve;

const GITEA_SPEC: &[u8] = include_bytes!("../../specs/gitea-1.27.0.swagger.json");
const FORGEJO_SPEC: &[u8] = include_bytes!("../../specs/forgejo-16.0.1.swagger.json");

/// One operation of the spec.
#[derive(Debug)]
pub(crate) struct Operation {
    pub id: String,
    /// Takes both `page` and `limit` query parameters.
    pub paginated: bool,
    /// What the generic fallback answers.
    pub fallback: Fallback,
}

/// The operations of one flavor and their router.
#[derive(Debug)]
pub(crate) struct Api {
    pub ops: Vec<Operation>,
    pub router: Router,
}

impl Api {
    fn load(flavor: Flavor) -> Api {
        let spec: Value = serde_json::from_slice(raw(flavor)).expect("embedded spec is valid JSON");
        let global_produces = string_list(&spec["produces"]);
        let mut ops = Vec::new();
        let mut router = Router::default();
        let paths = spec["paths"].as_object().expect("spec has paths");
        for (path, item) in paths {
            let Some(item) = item.as_object() else {
                continue;
            };
            for (method, op) in item {
                if method == "parameters" {
                    continue;
                }
                let method = method.to_ascii_uppercase();
                let params = parameters(&spec, item, op);
                let enums: HashMap<String, Vec<String>> = params
                    .iter()
                    .filter(|p| p["in"] == "path")
                    .filter_map(|p| {
                        let values = string_list(&p["enum"]);
                        let name = p["name"].as_str()?.to_string();
                        (!values.is_empty()).then_some((name, values))
                    })
                    .collect();
                let has_query = |name: &str| params.iter().any(|p| p["in"] == "query" && p["name"] == name);
                let id = op["operationId"].as_str().unwrap_or_default().to_string();
                let catch_all = catch_all::param(flavor, &method, path, &id);
                let index = ops.len();
                router.add(&method, Template::parse(path, catch_all, &enums), index);
                let produces = match op.get("produces") {
                    Some(p) => string_list(p),
                    None => global_produces.clone(),
                };
                ops.push(Operation {
                    id,
                    paginated: has_query("page") && has_query("limit"),
                    fallback: Fallback::from_spec(&spec, op, &produces),
                });
            }
        }
        Api { ops, router }
    }
}

/// The embedded Swagger document of `flavor`.
pub(crate) fn raw(flavor: Flavor) -> &'static [u8] {
    match flavor {
        Flavor::Gitea => GITEA_SPEC,
        Flavor::Forgejo => FORGEJO_SPEC,
    }
}

/// The parsed spec of `flavor`, built on first use.
pub(crate) fn api(flavor: Flavor) -> &'static Api {
    static GITEA: OnceLock<Api> = OnceLock::new();
    static FORGEJO: OnceLock<Api> = OnceLock::new();
    let cell = match flavor {
        Flavor::Gitea => &GITEA,
        Flavor::Forgejo => &FORGEJO,
    };
    cell.get_or_init(|| Api::load(flavor))
}

/// Path-level and operation-level parameters, `$ref`s resolved.
fn parameters<'a>(
    spec: &'a Value,
    item: &'a serde_json::Map<String, Value>,
    op: &'a Value,
) -> Vec<&'a Value> {
    let level =
        |v: Option<&'a Value>| v.and_then(Value::as_array).into_iter().flatten().map(|p| resolve(spec, p));
    level(item.get("parameters")).chain(level(op.get("parameters"))).collect()
}

fn string_list(v: &Value) -> Vec<String> {
    v.as_array().into_iter().flatten().filter_map(|s| s.as_str().map(str::to_string)).collect()
}
