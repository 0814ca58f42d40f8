//! Names that mean different things on Gitea and Forgejo (or across Gitea versions).
//!
//! A model that learned `repoUpdateBranch` on one forge must not assume the same effect on
//! the other, so the description of each of these tools states what it does on the flavor
//! served (spec-analysis.md §6 "Same operationId, different meaning"). One row per flavor
//! and name; the text replaces the spec's summary.

use super::Flavor;

/// One flavor's meaning of a clashing name.
#[derive(Debug)]
pub(crate) struct Meaning {
    pub(crate) flavor: Flavor,
    pub(crate) operation: &'static str,
    pub(crate) summary: &'static str,
}

/// The table.
pub(crate) const MEANINGS: &[Meaning] = &[
    Meaning {
        flavor: Flavor::Gitea,
        operation: "repoUpdateBranch",
        summary: "Move a branch to another commit (updates its reference; does not rename). To rename a branch use repoRenameBranch",
    },
    Meaning {
        flavor: Flavor::Forgejo,
        operation: "repoUpdateBranch",
        summary: "Rename a branch: body.name is the new name (does not move the branch to another commit)",
    },
    Meaning {
        flavor: Flavor::Gitea,
        operation: "deletePackage",
        summary: "Delete a whole package with all its versions. To delete one version use deletePackageVersion",
    },
    Meaning {
        flavor: Flavor::Forgejo,
        operation: "deletePackage",
        summary: "Delete one version of a package (the version path parameter is required); other versions stay",
    },
    Meaning {
        flavor: Flavor::Gitea,
        operation: "issueRemoveLabel",
        summary: "Remove a label from an issue. id is the label's numeric ID, not its name",
    },
    Meaning {
        flavor: Flavor::Forgejo,
        operation: "issueRemoveLabel",
        summary: "Remove a label from an issue. identifier is the label's name or its numeric ID",
    },
    Meaning {
        flavor: Flavor::Gitea,
        operation: "userBlockUser",
        summary: "Block a user for the signed-in user (PUT /user/blocks/{username}, optional note); undo with userUnblockUser",
    },
    Meaning {
        flavor: Flavor::Forgejo,
        operation: "userBlockUser",
        summary: "Block a user for the signed-in user (PUT /user/block/{username}); undo with userUnblockUser",
    },
    Meaning {
        flavor: Flavor::Gitea,
        operation: "userUnblockUser",
        summary: "Unblock a user the signed-in user blocked (DELETE /user/blocks/{username})",
    },
    Meaning {
        flavor: Flavor::Forgejo,
        operation: "userUnblockUser",
        summary: "Unblock a user the signed-in user blocked (PUT /user/unblock/{username}, not a DELETE)",
    },
];

/// The flavor's own summary of a clashing name, if it is one.
pub(crate) fn summary_for(flavor: Flavor, operation: &str) -> Option<&'static str> {
    MEANINGS.iter().find(|m| m.flavor == flavor && m.operation == operation).map(|m| m.summary)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::Catalog;

    #[test]
    fn every_row_names_an_operation_of_its_flavor_and_shows_in_its_description() {
        for m in MEANINGS {
            let c = Catalog::build(m.flavor.embedded_spec(), m.flavor, None).unwrap();
            let t = c
                .get(m.operation)
                .unwrap_or_else(|| panic!("{} is not a {:?} operation", m.operation, m.flavor));
            assert!(t.description.starts_with(m.summary), "{}: {}", m.operation, t.description);
        }
    }

    /// The table must cover every name whose route differs between the two specs: a new
    /// clash in a future spec fails here until someone writes down both meanings.
    #[test]
    fn every_name_with_different_routes_on_the_two_flavors_has_both_meanings() {
        let g = Catalog::build(Flavor::Gitea.embedded_spec(), Flavor::Gitea, None).unwrap();
        let f = Catalog::build(Flavor::Forgejo.embedded_spec(), Flavor::Forgejo, None).unwrap();
        for tg in g.operations() {
            let Some(tf) = f.get(&tg.name) else { continue };
            let (a, b) = (tg.operation().unwrap(), tf.operation().unwrap());
            if a.method != b.method || a.template.segments.len() != b.template.segments.len() || {
                let names = |o: &crate::catalog::Operation| {
                    o.template.params().map(str::to_owned).collect::<Vec<_>>()
                };
                names(a) != names(b)
            } {
                for flavor in [Flavor::Gitea, Flavor::Forgejo] {
                    assert!(
                        summary_for(flavor, &tg.name).is_some(),
                        "{} means {} {} on Gitea and {} {} on Forgejo: add its {:?} meaning",
                        tg.name,
                        a.method.as_str(),
                        a.path,
                        b.method.as_str(),
                        b.path,
                        flavor
                    );
                }
            }
        }
    }
}
