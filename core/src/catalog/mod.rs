//! The catalog: every tool this server offers, built once at start-up from a spec.
//!
//! Plain data, shared read-only: `tools/list`, the `tools` command and the call pipeline
//! all read the same `Catalog`. Nothing here talks to the network; the flavor and version
//! (which decide the spec and the wildcard routes) are given by the caller.

pub mod attachment_tool;
pub(crate) mod discovery_tools;
pub(crate) mod fields;
pub(crate) mod fixes;
pub(crate) mod meanings;
pub(crate) mod operation;
pub mod raw_tool;
pub mod results;
pub(crate) mod schema;
pub(crate) mod search;
pub mod spec;
pub(crate) mod tool;
pub mod toolsets;
pub(crate) mod wildcard;

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

pub use operation::{
    BodyEncoding, CollectionFormat, Location, Method, Operation, Paging, Param, PathTemplate, Piece,
    ResponseKind,
};
pub use tool::{Target, ToolDef};

/// Which forge software the spec describes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Flavor {
    Gitea,
    Forgejo,
}

impl Flavor {
    /// Lower-case name, as used in flags and in `wildcard-params.json`.
    pub fn as_str(self) -> &'static str {
        match self {
            Flavor::Gitea => "gitea",
            Flavor::Forgejo => "forgejo",
        }
    }

    /// The product name, as shown to people.
    pub fn display_name(self) -> &'static str {
        match self {
            Flavor::Gitea => "Gitea",
            Flavor::Forgejo => "Forgejo",
        }
    }

    /// The spec embedded in the binary for this flavor: the file in `specs/` without the
    /// whitespace between its tokens (`build.rs`).
    pub fn embedded_spec(self) -> &'static [u8] {
        match self {
            Flavor::Gitea => include_bytes!(concat!(env!("OUT_DIR"), "/gitea-1.27.0.swagger.json")),
            Flavor::Forgejo => include_bytes!(concat!(env!("OUT_DIR"), "/forgejo-16.0.1.swagger.json")),
        }
    }
}

/// A forge version such as `1.27.0` or `16.0.1+gitea-1.22.0`, compared on its numbers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Version {
    pub text: String,
    /// major, minor, patch of the product itself (for Forgejo: the Forgejo numbers).
    pub numbers: (u64, u64, u64),
}

impl Version {
    /// Parse the leading `major.minor.patch` of a version string; missing parts are 0.
    pub fn parse(text: &str) -> Option<Version> {
        let core = text.trim().trim_start_matches('v');
        let core = core.split(['+', '-', ' ']).next().unwrap_or("");
        let mut it = core.split('.').map(|p| p.parse::<u64>());
        let major = it.next()?.ok()?;
        let minor = it.next().unwrap_or(Ok(0)).ok()?;
        let patch = it.next().unwrap_or(Ok(0)).unwrap_or(0);
        Some(Version { text: text.trim().to_owned(), numbers: (major, minor, patch) })
    }

    /// The flavor a `/api/v1/version` answer reveals: Forgejo reports `X+gitea-Y`.
    pub fn flavor(&self) -> Flavor {
        if self.text.contains("+gitea-") { Flavor::Forgejo } else { Flavor::Gitea }
    }
}

/// Why a spec could not be turned into tools.
#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    #[error("the spec is not valid JSON: {0}")]
    Json(String),
    #[error("the spec is not a Swagger 2.0 document: {0}")]
    Shape(String),
    #[error("operation {op}: {msg}")]
    Operation { op: String, msg: String },
}

/// Every tool, by name, in spec order, plus the raw tool.
#[derive(Debug)]
pub struct Catalog {
    pub flavor: Flavor,
    /// The version the wildcard routes were chosen for (detected, or the spec's own).
    pub version: Version,
    /// `info.version` of the spec the tools were generated from.
    pub spec_version: String,
    tools: Vec<Arc<ToolDef>>,
    by_name: HashMap<String, usize>,
    /// The built-in tools that are not spec operations: discovery, raw request, attachment
    /// download.
    builtins: Vec<Arc<ToolDef>>,
    /// The spec the catalog was built from: its definitions are read when first needed.
    spec: Arc<spec::Spec>,
    /// The spec's definitions as results hold them (the shape stage reads them).
    definitions: OnceLock<results::Definitions>,
    /// Word search over `tools` (the discovery search tool), built at the first search.
    index: OnceLock<search::Index>,
}

impl Catalog {
    /// Build the catalog from spec bytes. `version` is the forge's version when known;
    /// otherwise the spec's own `info.version` is assumed.
    pub fn build(
        spec_bytes: &'static [u8],
        flavor: Flavor,
        version: Option<Version>,
    ) -> Result<Catalog, CatalogError> {
        let (spec, operations) = spec::Spec::parse(spec_bytes)?;
        let spec = Arc::new(spec);
        let version = version
            .or_else(|| Version::parse(&spec.info_version))
            .unwrap_or(Version { text: spec.info_version.clone(), numbers: (0, 0, 0) });
        let wildcards = wildcard::WildcardTable::embedded();
        let fixes = fixes::for_flavor(flavor);
        let mut tools = Vec::with_capacity(operations.len());
        let mut by_name = HashMap::with_capacity(operations.len());
        for (index, raw) in operations.iter().enumerate() {
            let op = operation::Operation::from_spec(raw, &spec, flavor, &version, &wildcards, &fixes)?;
            let tool = ToolDef::new(op, raw, &spec, index, flavor);
            if by_name.insert(tool.name().to_owned(), tools.len()).is_some() {
                return Err(CatalogError::Operation {
                    op: tool.name().to_owned(),
                    msg: "the operationId is used twice".into(),
                });
            }
            tools.push(Arc::new(tool));
        }
        let builtins = discovery_tools::definitions(flavor)
            .into_iter()
            .chain([raw_tool::definition(flavor), attachment_tool::definition(flavor)])
            .map(Arc::new)
            .collect();
        let spec_version = spec.info_version.clone();
        Ok(Catalog {
            flavor,
            version,
            spec_version,
            tools,
            by_name,
            builtins,
            spec,
            definitions: OnceLock::new(),
            index: OnceLock::new(),
        })
    }

    /// Every tool whose input schema does not compile, with the reason (`doctor` reports
    /// them; a call to one is refused with the reason).
    pub fn uncompilable(&self) -> Vec<(&str, String)> {
        self.all_tools().filter_map(|t| t.validator().err().map(|e| (t.name(), e.to_owned()))).collect()
    }

    /// Offer the optional `sudo` argument (`SUDO_ALLOWED_USERS`, judged by the server's
    /// `identify::sudo`) on every operation, the raw tool and the call tool, in their full and
    /// lean schemas; done once, right after `build`. An operation with a path, body or form parameter of that name
    /// (no embedded spec has one) keeps its own parameter and does not offer sudo — the call
    /// tool's `sudo` still reaches it; the names of those are returned. A query parameter of
    /// that name is the forges' own sudo: the judged argument takes its place.
    pub fn offer_sudo(&mut self) -> Vec<String> {
        let mut kept = Vec::new();
        for tool in self.tools.iter_mut().chain(self.builtins.iter_mut()) {
            let offers = match &tool.target {
                Target::Operation(op)
                    if op
                        .param(crate::identity::SUDO_ARGUMENT)
                        .is_some_and(|p| p.location != Location::Query) =>
                {
                    kept.push(op.id.clone());
                    false
                }
                Target::Operation(_) | Target::Raw | Target::CallOperation => true,
                Target::AttachmentDownload | Target::SearchOperations | Target::OperationSchema => false,
            };
            if offers {
                Arc::get_mut(tool).expect("the catalog is not shared while it is built").offer_sudo();
            }
        }
        kept
    }

    /// Offer the optional `confirm` argument on the tools `offers` names (an operation that
    /// may need a person's confirmation, the raw tool, the call tool), in the listed schema
    /// too where it says `Some(true)`; done once, right after `build`, before any schema is built.
    pub fn offer_confirm(&mut self, offers: impl Fn(&ToolDef) -> Option<bool>) {
        for tool in self.tools.iter_mut().chain(self.builtins.iter_mut()) {
            if let Some(listed) = offers(tool) {
                Arc::get_mut(tool)
                    .expect("the catalog is not shared while it is built")
                    .offer_confirm(listed);
            }
        }
    }

    /// The spec's definitions as results hold them, read at the first call that needs them.
    pub fn definitions(&self) -> &results::Definitions {
        self.definitions.get_or_init(|| results::Definitions::of(&self.spec))
    }

    /// The spec's definition `name`, parsed (the output schemas read them).
    pub(crate) fn definition_schema(&self, name: &str) -> Option<serde_json::Value> {
        self.spec.definition(&serde_json::json!({"$ref": format!("#/definitions/{name}")}))
    }

    /// The tools generated from the spec, in spec order (without the raw tool).
    pub fn operations(&self) -> impl Iterator<Item = &Arc<ToolDef>> {
        self.tools.iter()
    }

    /// Every tool a client sees: the generated ones, then the built-in ones.
    pub fn all_tools(&self) -> impl Iterator<Item = &Arc<ToolDef>> {
        self.tools.iter().chain(self.builtins.iter())
    }

    /// Look a tool up by name (the raw tool included).
    pub fn get(&self, name: &str) -> Option<&Arc<ToolDef>> {
        match self.by_name.get(name) {
            Some(&i) => Some(&self.tools[i]),
            None => self.builtins.iter().find(|t| t.name == name),
        }
    }

    /// The operations that best match `query`, best first (see `search`), among those
    /// `allowed` admits.
    pub fn search(
        &self,
        query: &str,
        limit: usize,
        allowed: impl Fn(&ToolDef) -> bool,
    ) -> Vec<&Arc<ToolDef>> {
        self.index
            .get_or_init(|| search::Index::build(self.tools.iter().map(|t| t.as_ref())))
            .search(query, limit, |i| allowed(&self.tools[i]))
            .into_iter()
            .map(|h| &self.tools[h.position])
            .collect()
    }

    /// The spec operation a raw-tool call (`method`, `path` arguments) reaches, if any.
    pub fn reached_by_raw(&self, args: &serde_json::Map<String, serde_json::Value>) -> Option<&Arc<ToolDef>> {
        let method = args.get("method").and_then(serde_json::Value::as_str).and_then(Method::parse)?;
        let path = args.get("path").and_then(serde_json::Value::as_str)?;
        self.match_path(method, path)
    }

    /// The spec operation a method and a literal path (relative to `/api/v1`, `/`-separated,
    /// not encoded) would reach, if any. Used by the raw tool to know about paging and
    /// response kinds.
    pub(crate) fn match_path(&self, method: Method, path: &str) -> Option<&Arc<ToolDef>> {
        let segments = segments(path);
        // Prefer the most specific route, as the forge's router does: more literal pieces first.
        self.tools
            .iter()
            .filter(|t| {
                t.operation()
                    .is_some_and(|op| op.method == method && op.template.matches(&segments, &op.params))
            })
            .max_by_key(|t| t.operation().map(|op| op.template.literal_weight()))
    }
}

/// The segments of a path relative to `/api/v1` (a raw request's route).
pub fn segments(path: &str) -> Vec<&str> {
    path.trim_start_matches('/').split('/').collect()
}

/// The embedded catalog of `flavor`, built once for all the core's tests that only read one
/// (building one takes a good part of a second).
#[cfg(test)]
pub(crate) fn embedded(flavor: Flavor) -> &'static Catalog {
    static GITEA: OnceLock<Catalog> = OnceLock::new();
    static FORGEJO: OnceLock<Catalog> = OnceLock::new();
    let cell = match flavor {
        Flavor::Gitea => &GITEA,
        Flavor::Forgejo => &FORGEJO,
    };
    cell.get_or_init(|| {
        Catalog::build(flavor.embedded_spec(), flavor, None).expect("the embedded spec builds")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_parse_and_reveal_the_flavor() {
        let g = Version::parse("1.27.0").unwrap();
        assert_eq!((g.numbers, g.flavor()), ((1, 27, 0), Flavor::Gitea));
        let f = Version::parse("16.0.1+gitea-1.22.0").unwrap();
        assert_eq!((f.numbers, f.flavor()), ((16, 0, 1), Flavor::Forgejo));
        let dev = Version::parse("1.26.0+dev-45-g1234abc").unwrap();
        assert_eq!((dev.numbers, dev.flavor()), ((1, 26, 0), Flavor::Gitea));
        assert!(Version::parse("garbage").is_none());
    }

    #[test]
    fn the_embedded_specs_are_the_files_without_their_whitespace() {
        let files: [(Flavor, &[u8]); 2] = [
            (Flavor::Gitea, include_bytes!("../../../specs/gitea-1.27.0.swagger.json")),
            (Flavor::Forgejo, include_bytes!("../../../specs/forgejo-16.0.1.swagger.json")),
        ];
        for (flavor, file) in files {
            let embedded = flavor.embedded_spec();
            let read = |b: &[u8]| serde_json::from_slice::<serde_json::Value>(b).expect("JSON");
            assert_eq!(read(embedded), read(file), "{flavor:?}");
            // No line breaks left (inside strings they are escapes), and 40 % smaller.
            assert!(!embedded.contains(&b'\n'), "{flavor:?}");
            assert!(
                embedded.len() * 10 < file.len() * 6,
                "{flavor:?}: {} of {} bytes",
                embedded.len(),
                file.len()
            );
        }
    }

    #[test]
    fn embedded_specs_give_the_documented_tool_counts() {
        let g = Catalog::build(Flavor::Gitea.embedded_spec(), Flavor::Gitea, None).unwrap();
        assert_eq!(g.operations().count(), 482);
        assert_eq!(g.spec_version, "1.27.0");
        let f = Catalog::build(Flavor::Forgejo.embedded_spec(), Flavor::Forgejo, None).unwrap();
        assert_eq!(f.operations().count(), 506);
        assert_eq!(f.all_tools().count(), 511);
    }

    #[test]
    fn every_embedded_tool_has_a_validator_and_nothing_is_built_before_it_is_needed() {
        for flavor in [Flavor::Gitea, Flavor::Forgejo] {
            let c = Catalog::build(flavor.embedded_spec(), flavor, None).unwrap();
            assert!(c.all_tools().all(|t| !t.is_built()), "{flavor:?}: schemas wait for their first use");
            assert!(c.index.get().is_none());
            assert_eq!(c.uncompilable(), Vec::<(&str, String)>::new(), "{flavor:?}");
            assert!(c.all_tools().all(|t| t.is_built()));
        }
    }

    #[test]
    fn a_schema_the_validator_refuses_is_reported_and_refuses_its_calls() {
        let spec = br#"{"swagger":"2.0","info":{"version":"1"},"paths":{
            "/a":{"get":{"operationId":"badPattern","parameters":[{"name":"q","in":"query","type":"string","pattern":"(unclosed"}],"responses":{"200":{"description":"ok"}}}},
            "/b":{"get":{"operationId":"fine","responses":{"200":{"description":"ok"}}}}}}"#;
        let c = Catalog::build(spec, Flavor::Gitea, None).unwrap();
        let bad = c.uncompilable();
        assert_eq!(bad.iter().map(|(n, _)| *n).collect::<Vec<_>>(), ["badPattern"]);
        assert!(bad[0].1.contains("does not compile"), "{}", bad[0].1);
        let e = crate::args::validate::validate(c.get("badPattern").unwrap(), &mut Default::default())
            .unwrap_err();
        assert!(e.to_string().contains("cannot be checked"), "{e}");
    }

    #[test]
    fn sudo_is_offered_on_operations_the_raw_and_the_call_tool_and_no_operation_has_its_own() {
        for flavor in [Flavor::Gitea, Flavor::Forgejo] {
            let mut c = Catalog::build(flavor.embedded_spec(), flavor, None).unwrap();
            assert!(c.all_tools().all(|t| !t.offers_sudo));
            assert_eq!(c.offer_sudo(), Vec::<String>::new(), "{flavor:?}: no operation has a sudo parameter");
            let without: Vec<&str> = c.all_tools().filter(|t| !t.offers_sudo).map(|t| t.name()).collect();
            assert_eq!(
                without,
                ["gitea_search_operations", "gitea_get_operation_schema", "gitea_download_attachment"]
            );
            for t in c.all_tools().filter(|t| t.offers_sudo) {
                for schema in [t.input_schema(), t.listed_schema()] {
                    assert_eq!(schema["properties"]["sudo"]["type"], "string", "{}", t.name);
                    let required = schema.get("required").and_then(|r| r.as_array());
                    assert!(!required.is_some_and(|r| r.iter().any(|n| n == "sudo")), "{}", t.name);
                }
            }
        }
    }

    #[test]
    fn an_operation_with_its_own_sudo_parameter_keeps_it() {
        let spec = br#"{"swagger":"2.0","info":{"version":"1"},"paths":{
            "/a/{sudo}":{"get":{"operationId":"withSudo","parameters":[{"name":"sudo","in":"path","required":true,"type":"integer"}],"responses":{"200":{"description":"ok"}}}},
            "/q":{"get":{"operationId":"querySudo","parameters":[{"name":"sudo","in":"query","type":"integer"}],"responses":{"200":{"description":"ok"}}}},
            "/b":{"get":{"operationId":"plain","responses":{"200":{"description":"ok"}}}}}}"#;
        let mut c = Catalog::build(spec, Flavor::Gitea, None).unwrap();
        assert_eq!(c.offer_sudo(), ["withSudo"]);
        let own = c.get("withSudo").unwrap();
        assert!(!own.offers_sudo);
        assert_eq!(own.input_schema()["properties"]["sudo"]["type"], "integer");
        // `?sudo=` is the forges' impersonation: the judged argument replaces it.
        let query = c.get("querySudo").unwrap();
        assert!(query.offers_sudo);
        assert_eq!(query.input_schema()["properties"]["sudo"]["type"], "string");
        assert!(c.get("plain").unwrap().offers_sudo);
    }

    #[test]
    fn raw_paths_match_the_most_specific_route() {
        let g = Catalog::build(Flavor::Gitea.embedded_spec(), Flavor::Gitea, None).unwrap();
        let name = |m, p| g.match_path(m, p).map(|t| t.name().to_owned());
        assert_eq!(name(Method::Get, "/repos/o/r/issues/comments/5").as_deref(), Some("issueGetComment"));
        assert_eq!(name(Method::Get, "/repos/o/r/issues/5").as_deref(), Some("issueGetIssue"));
        assert_eq!(name(Method::Get, "/repos/o/r/contents/a/b/c.md").as_deref(), Some("repoGetContents"));
        assert_eq!(name(Method::Get, "/repos/o/r/issues").as_deref(), Some("issueListIssues"));
        assert_eq!(name(Method::Get, "/nope"), None);
    }
}
