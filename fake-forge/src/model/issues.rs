//! Issues (create, get, paged list), their comments, pull requests (an issue with a head and
//! a base: create, get) and issue attachments (multipart upload, list, get, and the
//! download URL `ROOT_URL/attachments/{uuid}` served outside `/api/v1`, as Gitea does).

use serde_json::{Value, json};

use super::{Attachment, Comment, Ctx, Issue, Model, Pull, json, repo_key, tri};
use crate::multipart;
use crate::paging::{Page, paginate};
use crate::reply::Reply;
use crate::util::{fake_uuid, now_rfc3339};

/// `GET /repos/{owner}/{repo}/issues`: newest first, `state` (open by default, closed, all),
/// `q` (title substring), paged with `X-Total-Count` and `Link`.
pub(super) fn list(m: &mut Model, cx: &Ctx) -> Reply {
    let repo = tri!(m.repo(cx));
    let state = cx.query("state").unwrap_or("open");
    let q = cx.query("q").map(str::to_lowercase);
    let items: Vec<Value> = repo
        .issues
        .iter()
        .rev()
        .filter(|i| state == "all" || i.state == state)
        .filter(|i| q.as_ref().is_none_or(|q| i.title.to_lowercase().contains(q)))
        .map(|i| {
            json::issue(cx.root_url, repo, i, assets(m, cx, &repo_key(&repo.owner, &repo.name), i.number))
        })
        .collect();
    let page = Page::from_query(&cx.query);
    let body = Value::Array(page.slice(&items).to_vec());
    paginate(Reply::json(200, &body), cx.root_url, cx.uri, items.len(), page, true)
}

fn assets(m: &Model, cx: &Ctx, key: &str, number: i64) -> Vec<Value> {
    m.attachments
        .iter()
        .filter(|a| a.repo_key == key && a.issue == number)
        .map(|a| json::attachment(cx.root_url, a))
        .collect()
}

/// `POST /repos/{owner}/{repo}/issues`.
pub(super) fn create(m: &mut Model, cx: &Ctx) -> Reply {
    let id = m.next_id();
    let poster = cx.caller.unwrap_or_default().to_string();
    let poster_id = m.known_user_id(&poster);
    let repo = tri!(m.repo_mut(cx));
    let body = cx.json();
    let Some(title) = body["title"].as_str().filter(|t| !t.trim().is_empty()) else {
        return cx.error(422, "[Title]: Required");
    };
    let issue = Issue {
        id,
        number: repo.issues.len() as i64 + 1,
        title: title.to_string(),
        body: body["body"].as_str().unwrap_or("").to_string(),
        state: "open".into(),
        poster,
        poster_id,
        created: now_rfc3339(),
    };
    let v = json::issue(cx.root_url, repo, &issue, Vec::new());
    repo.issues.push(issue);
    Reply::json(201, &v)
}

/// Finds the issue `{index}` of the request's repository.
fn issue<'m>(m: &'m Model, cx: &Ctx) -> Result<(&'m super::Repo, &'m Issue), Reply> {
    let repo = m.repo(cx)?;
    let number = cx.param("index").parse::<i64>().unwrap_or(-1);
    let issue = repo.issues.iter().find(|i| i.number == number);
    issue.map(|i| (repo, i)).ok_or_else(|| cx.not_found())
}

/// `GET /repos/{owner}/{repo}/issues/{index}`.
pub(super) fn get(m: &mut Model, cx: &Ctx) -> Reply {
    let (repo, i) = tri!(issue(m, cx));
    let key = repo_key(&repo.owner, &repo.name);
    Reply::json(200, &json::issue(cx.root_url, repo, i, assets(m, cx, &key, i.number)))
}

/// `POST /repos/{owner}/{repo}/issues/{index}/assets`: multipart, file field `attachment`,
/// optional `?name=`.
pub(super) fn create_attachment(m: &mut Model, cx: &Ctx) -> Reply {
    let (repo, i) = tri!(issue(m, cx));
    let (key, number) = (repo_key(&repo.owner, &repo.name), i.number);
    let file = cx
        .content_type
        .and_then(multipart::boundary)
        .and_then(|b| multipart::parse(cx.body, &b))
        .and_then(|parts| parts.into_iter().find(|p| p.name == "attachment"));
    let Some(file) = file else {
        return cx.error(400, "http: no such file");
    };
    let name = cx.query("name").map(str::to_string).or(file.filename).unwrap_or_else(|| "attachment".into());
    let attachment = Attachment {
        id: m.next_id(),
        uuid: fake_uuid(),
        repo_key: key,
        issue: number,
        name,
        content_type: file.content_type.unwrap_or_else(|| "application/octet-stream".into()),
        data: file.data,
        created: now_rfc3339(),
    };
    let v = json::attachment(cx.root_url, &attachment);
    m.attachments.push(attachment);
    Reply::json(201, &v)
}

/// `GET /repos/{owner}/{repo}/issues/{index}/assets`.
pub(super) fn list_attachments(m: &mut Model, cx: &Ctx) -> Reply {
    let (repo, i) = tri!(issue(m, cx));
    let key = repo_key(&repo.owner, &repo.name);
    Reply::json(200, &Value::Array(assets(m, cx, &key, i.number)))
}

/// `GET /repos/{owner}/{repo}/issues/{index}/assets/{attachment_id}`.
pub(super) fn get_attachment(m: &mut Model, cx: &Ctx) -> Reply {
    let (repo, i) = tri!(issue(m, cx));
    let key = repo_key(&repo.owner, &repo.name);
    let id = cx.param("attachment_id").parse::<i64>().unwrap_or(-1);
    m.attachments
        .iter()
        .find(|a| a.id == id && a.repo_key == key && a.issue == i.number)
        .map_or_else(|| cx.not_found(), |a| Reply::json(200, &json::attachment(cx.root_url, a)))
}

/// `GET /attachments/{uuid}`: the uploaded bytes.
pub(crate) fn serve_attachment(m: &Model, root_url: &str, uuid: &str) -> Reply {
    match m.attachments.iter().find(|a| a.uuid == uuid) {
        Some(a) => Reply::bytes(200, &a.content_type, a.data.clone())
            .header("content-disposition", format!("attachment; filename=\"{}\"", a.name.replace('"', ""))),
        None => Reply::json(
            404,
            &json!({"errors": null, "message": "not found", "url": format!("{root_url}api/swagger")}),
        ),
    }
}

/// `GET /repos/{owner}/{repo}/issues/{index}/comments`: every comment, oldest first (Gitea
/// does not page this list).
pub(super) fn list_comments(m: &mut Model, cx: &Ctx) -> Reply {
    let (repo, i) = tri!(issue(m, cx));
    let list: Vec<Value> = repo
        .comments
        .iter()
        .filter(|c| c.issue == i.number)
        .map(|c| json::comment(cx.root_url, repo, c))
        .collect();
    Reply::json(200, &Value::Array(list))
}

/// `POST /repos/{owner}/{repo}/issues/{index}/comments`.
pub(super) fn create_comment(m: &mut Model, cx: &Ctx) -> Reply {
    let number = tri!(issue(m, cx)).1.number;
    let id = m.next_id();
    let poster = cx.caller.unwrap_or_default().to_string();
    let poster_id = m.known_user_id(&poster);
    let body = cx.json();
    let Some(text) = body["body"].as_str().filter(|t| !t.trim().is_empty()) else {
        return cx.error(422, "[Body]: Required");
    };
    let repo = tri!(m.repo_mut(cx));
    let c = Comment { id, issue: number, body: text.to_string(), poster, poster_id, created: now_rfc3339() };
    let v = json::comment(cx.root_url, repo, &c);
    repo.comments.push(c);
    Reply::json(201, &v)
}

/// `POST /repos/{owner}/{repo}/pulls`: head and base must be branches of the repository.
pub(super) fn create_pull(m: &mut Model, cx: &Ctx) -> Reply {
    let id = m.next_id();
    let poster = cx.caller.unwrap_or_default().to_string();
    let poster_id = m.known_user_id(&poster);
    let repo = tri!(m.repo_mut(cx));
    let body = cx.json();
    let (Some(head), Some(base)) = (body["head"].as_str(), body["base"].as_str()) else {
        return cx.error(422, "[Head Base]: Required");
    };
    if !repo.branches.contains_key(head) || !repo.branches.contains_key(base) {
        return cx.error(404, "The target couldn't be found.");
    }
    if head == base {
        return cx.error(422, "Invalid PullRequest: There are no changes between the head and the base");
    }
    let issue = Issue {
        id,
        number: repo.issues.len() as i64 + 1,
        title: body["title"].as_str().unwrap_or("").to_string(),
        body: body["body"].as_str().unwrap_or("").to_string(),
        state: "open".into(),
        poster,
        poster_id,
        created: now_rfc3339(),
    };
    let pull = Pull { number: issue.number, head: head.to_string(), base: base.to_string(), merged: false };
    let v = json::pull(cx.root_url, repo, &issue, &pull);
    repo.issues.push(issue);
    repo.pulls.push(pull);
    Reply::json(201, &v)
}

/// `GET /repos/{owner}/{repo}/pulls/{index}`: 404 for an issue that is not a pull request.
pub(super) fn get_pull(m: &mut Model, cx: &Ctx) -> Reply {
    let (repo, i) = tri!(issue(m, cx));
    match repo.pulls.iter().find(|p| p.number == i.number) {
        Some(p) => Reply::json(200, &json::pull(cx.root_url, repo, i, p)),
        None => cx.not_found(),
    }
}

/// `GET /repos/issues/search`: open issues (`state`, `q` as for one repository) of every
/// repository the caller may see, newest first, each with its `repository`.
pub(super) fn search(m: &mut Model, cx: &Ctx) -> Reply {
    let state = cx.query("state").unwrap_or("open");
    let q = cx.query("q").map(str::to_lowercase);
    let mut found: Vec<(&super::Repo, &Issue)> = m
        .repos
        .values()
        .filter(|r| m.sees(cx, r))
        .flat_map(|r| r.issues.iter().map(move |i| (r, i)))
        .filter(|(_, i)| state == "all" || i.state == state)
        .filter(|(_, i)| q.as_ref().is_none_or(|q| i.title.to_lowercase().contains(q)))
        .collect();
    found.sort_by_key(|(_, i)| std::cmp::Reverse(i.id));
    let page = Page::from_query(&cx.query);
    let items: Vec<Value> = page
        .slice(&found)
        .iter()
        .map(|(r, i)| json::issue(cx.root_url, r, i, assets(m, cx, &repo_key(&r.owner, &r.name), i.number)))
        .collect();
    paginate(Reply::json(200, &Value::Array(items)), cx.root_url, cx.uri, found.len(), page, true)
}
