//! Catalog → rmcp `Tool` definitions, filtered per request.

use rmcp::model::{MetaObject, Tool, ToolAnnotations};

use aegis_core::catalog::{Catalog, Target, ToolDef};
use aegis_core::envelope;
use aegis_core::policy::{Narrowing, Policy};
use serde_json::{Map, Value};

use crate::forges::Forges;

/// One tool definition as clients see it: the lean schema, the title only where the
/// description does not begin with it (an operation's title is its summary's first sentence:
/// a client without one shows the name, and the model reads the description), and only the hints that mean something — `readOnlyHint` always (a
/// missing one reads as "may write"), destructive/idempotent only for tools that write,
/// since the protocol ignores them on read-only tools, and only where they differ from the
/// protocol's defaults (destructive, not idempotent).
pub(crate) fn to_rmcp(t: &ToolDef) -> Tool {
    let a = &t.annotations;
    let annotations = if a.read_only {
        ToolAnnotations::from_raw(None, Some(true), None, None, None)
    } else {
        let destructive = (!a.destructive).then_some(false);
        let idempotent = a.idempotent.then_some(true);
        ToolAnnotations::from_raw(None, Some(false), destructive, idempotent, None)
    };
    let mut tool = Tool::new(t.name.clone(), t.description.clone(), t.listed_schema().clone())
        .with_annotations(annotations);
    if !t.description.starts_with(t.title.as_str()) {
        tool.title = Some(t.title.clone());
    }
    if t.is_discovery() {
        tool = tool.with_meta(always_load());
    }
    tool
}

/// The `_meta` of the discovery tools: Claude Code defers a server's tools behind its own
/// search once they fill a tenth of the context, and keeps one loaded when its `_meta` says
/// so. Deferred, the three tools that reach every other operation would have to be found
/// before they could find anything.
fn always_load() -> MetaObject {
    MetaObject(Map::from_iter([("anthropic/alwaysLoad".to_owned(), Value::Bool(true))]))
}

/// Whether a client gets typed results: its protocol version is `from` (`STRUCTURED_CONTENT_FROM`)
/// or later. Versions are dates, so their text orders them.
pub(crate) fn typed_for(from: Option<&str>, version: Option<&str>) -> bool {
    matches!((from, version), (Some(from), Some(v)) if v >= from)
}

/// The tools `tools/list` shows to a request narrowed so, built-in tools first (a client that
/// truncates a long list keeps the way to the rest), then the operations in spec order. When
/// the call is read-only (the server's `READ_ONLY` or the request's `X-MCP-Readonly`), the raw
/// tool and `gitea_call_operation` can only read, and say so: clients may then run them unasked.
/// A client given typed results (`typed`) sees the envelope's `outputSchema` on every tool.
pub fn listed(catalog: &Catalog, policy: &Policy, narrowing: &Narrowing, typed: bool) -> Vec<Tool> {
    let read_only = policy.read_only || narrowing.read_only;
    let builtins = catalog.all_tools().filter(|t| t.operation().is_none());
    let operations = catalog.all_tools().filter(|t| t.operation().is_some());
    builtins
        .chain(operations)
        .filter(|t| policy.lists(narrowing, t))
        .map(|t| match t.target {
            Target::Raw | Target::CallOperation if read_only => {
                to_rmcp(t).with_annotations(ToolAnnotations::from_raw(None, Some(true), None, None, None))
            }
            _ => to_rmcp(t),
        })
        .map(|tool| if typed { tool.with_raw_output_schema(envelope::schema::listed()) } else { tool })
        .collect()
}

/// The tools of every forge the server serves, as one list: with one forge, `listed`. With
/// profiles, the default profile's tools, each listed when any profile lists it, and each
/// taking `forge` (a plain string: the names are said once, in the server's instructions, so
/// that the list does not grow with them). A tool that another flavor's forge has with more
/// arguments lists those too, without their descriptions, and requires only what every flavor
/// requires: the call is checked against the schema of the forge it goes to.
pub fn listed_on(forges: &Forges, narrowing: &Narrowing, typed: bool) -> Vec<Tool> {
    let primary = forges.primary();
    if !forges.named() {
        return listed(&primary.catalog, &primary.policy, narrowing, typed);
    }
    let read_only = narrowing.read_only || forges.all().all(|p| p.policy.read_only);
    let mut others: Vec<&Catalog> = Vec::new();
    for p in forges.all() {
        if p.catalog.flavor != primary.catalog.flavor && !others.iter().any(|c| c.flavor == p.catalog.flavor)
        {
            others.push(&p.catalog);
        }
    }
    let lists = |t: &ToolDef| {
        forges.all().any(|p| p.catalog.get(&t.name).is_some_and(|own| p.policy.lists(narrowing, own)))
    };
    let builtins = primary.catalog.all_tools().filter(|t| t.operation().is_none());
    let operations = primary.catalog.all_tools().filter(|t| t.operation().is_some());
    builtins
        .chain(operations)
        .filter(|t| lists(t))
        .map(|t| {
            let mut tool = match t.target {
                Target::Raw | Target::CallOperation if read_only => {
                    to_rmcp(t).with_annotations(ToolAnnotations::from_raw(None, Some(true), None, None, None))
                }
                _ => to_rmcp(t),
            };
            // An operation some forges lack says where it is.
            let on: Vec<&str> =
                forges.all().filter(|p| p.catalog.get(&t.name).is_some()).filter_map(|p| p.name()).collect();
            if on.len() < forges.all().count() {
                let said = tool.description.as_deref().unwrap_or_default();
                tool.description = Some(format!("Only on {}. {said}", on.join(", ")).into());
            }
            let mut schema = (*tool.input_schema).clone();
            for other in others.iter().filter_map(|c| c.get(&t.name)) {
                widen(&mut schema, other.listed_schema());
            }
            if let Some(Value::Object(props)) = schema.get_mut("properties") {
                props.insert(
                    aegis_core::policy::route::ARGUMENT.into(),
                    serde_json::json!({"type": "string"}),
                );
            }
            tool.input_schema = std::sync::Arc::new(schema);
            tool
        })
        .map(|tool| if typed { tool.with_raw_output_schema(envelope::schema::listed()) } else { tool })
        .collect()
}

/// `schema` with the properties `other` has and it lacks (without their descriptions), and
/// requiring only what both require.
fn widen(schema: &mut Map<String, Value>, other: &Map<String, Value>) {
    if let (Some(Value::Object(props)), Some(Value::Object(more))) =
        (schema.get_mut("properties"), other.get("properties"))
    {
        for (name, def) in more {
            if props.contains_key(name) {
                continue;
            }
            let mut def = def.clone();
            if let Value::Object(d) = &mut def {
                d.remove("description");
            }
            props.insert(name.clone(), def);
        }
    }
    let theirs: Vec<&Value> =
        other.get("required").and_then(Value::as_array).map(|r| r.iter().collect()).unwrap_or_default();
    if let Some(Value::Array(required)) = schema.get_mut("required") {
        required.retain(|r| theirs.contains(&r));
        if required.is_empty() {
            schema.remove("required");
        }
    }
}

/// What the `tools` command prints: the `tools` array of `tools/list` as pretty JSON, or one
/// line per tool with its name and the first line of its description.
pub fn printout(tools: &[Tool], json: bool) -> String {
    if json {
        return format!("{}\n", serde_json::to_string_pretty(&tools).expect("tools serialize"));
    }
    tools
        .iter()
        .map(|t| {
            let first = t.description.as_deref().unwrap_or("").lines().next().unwrap_or("");
            format!("{:<45} {first}\n", t.name)
        })
        .collect()
}
