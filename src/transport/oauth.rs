//! The authorization server's HTTP side (the decisions are `oauth/`'s): the two metadata
//! documents, registration, the authorization and callback redirects, and the token
//! endpoint. These routes are meant to be reached from other origins (a browser-based
//! client registers and exchanges codes), so they check `Host` but not `Origin`, and
//! answer CORS preflights. Bodies are small forms or JSON: at most `MAX_FORM_BYTES`, within
//! the body timeout.

use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::Value;

use crate::oauth::{Browser, OAuth, OAuthError};

use crate::server::Server;

/// Largest registration or token request body.
pub(crate) const MAX_FORM_BYTES: usize = 16 * 1024;

#[derive(Clone)]
struct Ctx {
    server: Arc<Server>,
    oauth: Arc<OAuth>,
}

/// The authorization server's routes, for a server with sign-in configured.
pub(crate) fn routes(server: Arc<Server>, oauth: Arc<OAuth>) -> Router {
    let several = oauth.several();
    let ctx = Ctx { server, oauth };
    let router = Router::new()
        .route("/.well-known/oauth-protected-resource", get(resource_metadata))
        .route("/.well-known/oauth-protected-resource/{*rest}", get(resource_metadata))
        .route("/.well-known/oauth-authorization-server", get(server_metadata))
        .route("/.well-known/oauth-authorization-server/{*rest}", get(server_metadata))
        .route("/register", post(register).options(preflight))
        .route("/authorize", get(authorize).post(approve))
        .route(crate::oauth::CALLBACK_PATH, get(callback))
        .route("/token", post(token).options(preflight));
    // Each forge of several has its own callback; the one forge keeps `/oauth/callback` alone.
    let router = match several {
        true => router.route(&format!("{}/{{profile}}", crate::oauth::CALLBACK_PATH), get(profile_callback)),
        false => router,
    };
    router.with_state(ctx)
}

async fn resource_metadata(State(ctx): State<Ctx>) -> Response {
    json(StatusCode::OK, &ctx.oauth.resource_metadata())
}

async fn server_metadata(State(ctx): State<Ctx>) -> Response {
    json(StatusCode::OK, &ctx.oauth.server_metadata())
}

async fn preflight() -> Response {
    let mut r = StatusCode::NO_CONTENT.into_response();
    cors(&mut r);
    r.headers_mut().insert(header::ACCESS_CONTROL_ALLOW_METHODS, HeaderValue::from_static("POST, OPTIONS"));
    r.headers_mut().insert(
        header::ACCESS_CONTROL_ALLOW_HEADERS,
        HeaderValue::from_static("content-type, authorization"),
    );
    r
}

async fn register(State(ctx): State<Ctx>, req: Request) -> Response {
    let body = match small_body(&ctx.server, req).await {
        Ok(b) => b,
        Err(r) => return r,
    };
    match ctx.oauth.register(&body) {
        Ok(client) => json(StatusCode::CREATED, &client),
        Err(e) => error(&e),
    }
}

async fn authorize(State(ctx): State<Ctx>, req: Request) -> Response {
    let query = req.uri().query().unwrap_or("").as_bytes();
    let cookie = sign_in_cookie(&ctx.oauth, &req);
    browser(&ctx.oauth, ctx.oauth.authorize(&ctx.server.forges, query, cookie.as_deref()).await)
}

/// The consent page's answer. A browser sends `Origin` with a form POST: it must be this
/// server (a page elsewhere cannot answer for the person, and with `SameSite=Lax` its
/// request would not carry the cookie either).
async fn approve(State(ctx): State<Ctx>, req: Request) -> Response {
    let origin = req.headers().get(header::ORIGIN).map(|o| o.to_str().unwrap_or(""));
    if origin.is_some_and(|o| o != ctx.oauth.origin()) {
        return page(
            StatusCode::FORBIDDEN,
            "the answer came from another site; start again from your MCP client",
        );
    }
    let cookie = sign_in_cookie(&ctx.oauth, &req);
    let body = match small_body(&ctx.server, req).await {
        Ok(b) => b,
        Err(r) => return r,
    };
    browser(&ctx.oauth, ctx.oauth.approve(&ctx.server.forges, &body, cookie.as_deref()))
}

async fn callback(State(ctx): State<Ctx>, req: Request) -> Response {
    let query = req.uri().query().unwrap_or("").as_bytes();
    let cookie = sign_in_cookie(&ctx.oauth, &req);
    browser(&ctx.oauth, ctx.oauth.callback_at(&ctx.server.forges, None, query, cookie.as_deref()).await)
}

/// The callback of one forge of several: `/oauth/callback/<profile>`.
async fn profile_callback(
    State(ctx): State<Ctx>,
    axum::extract::Path(profile): axum::extract::Path<String>,
    req: Request,
) -> Response {
    let query = req.uri().query().unwrap_or("").as_bytes();
    let cookie = sign_in_cookie(&ctx.oauth, &req);
    let signed = ctx.oauth.callback_at(&ctx.server.forges, Some(&profile), query, cookie.as_deref()).await;
    browser(&ctx.oauth, signed)
}

/// The sign-in cookie's value, if the browser sent it.
fn sign_in_cookie(oauth: &OAuth, req: &Request) -> Option<String> {
    let (name, _) = oauth.cookie();
    req.headers()
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v.to_owned())
}

async fn token(State(ctx): State<Ctx>, req: Request) -> Response {
    let form = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim().to_ascii_lowercase().starts_with("application/x-www-form-urlencoded"));
    if req.method() == Method::POST && !form {
        return error(&OAuthError {
            status: 400,
            code: "invalid_request",
            description: "send the token request as application/x-www-form-urlencoded".into(),
        });
    }
    let body = match small_body(&ctx.server, req).await {
        Ok(b) => b,
        Err(r) => return r,
    };
    match ctx.oauth.token(&ctx.server.forges, &body).await {
        Ok(tokens) => json(StatusCode::OK, &tokens),
        Err(e) => error(&e),
    }
}

/// The body, within `MAX_FORM_BYTES` and the body timeout.
async fn small_body(server: &Server, req: Request) -> Result<Vec<u8>, Response> {
    let limited = http_body_util::Limited::new(req.into_body(), MAX_FORM_BYTES);
    let refused = |status: StatusCode, description: String| {
        error(&OAuthError { status: status.as_u16(), code: "invalid_request", description })
    };
    match tokio::time::timeout(server.settings.body_timeout, http_body_util::BodyExt::collect(limited)).await
    {
        Ok(Ok(c)) => Ok(c.to_bytes().to_vec()),
        Ok(Err(_)) => Err(refused(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("the request body is larger than {MAX_FORM_BYTES} bytes, or broke off"),
        )),
        Err(_) => Err(refused(StatusCode::REQUEST_TIMEOUT, "the request body did not arrive in time".into())),
    }
}

fn browser(oauth: &OAuth, b: Browser) -> Response {
    match b {
        Browser::Consent(consent) => consent_page(oauth, &consent),
        Browser::Redirect(url) => match HeaderValue::from_str(&url) {
            Ok(location) => {
                let mut r = StatusCode::FOUND.into_response();
                r.headers_mut().insert(header::LOCATION, location);
                r.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
                r
            }
            Err(_) => page(StatusCode::BAD_REQUEST, "the redirect address cannot be sent in a header"),
        },
        Browser::Page { status, message } => {
            page(StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_REQUEST), &message)
        }
        Browser::Notice { message, next } => notice_page(&message, &next),
    }
}

/// A page that tells the person something and links on to where the sign-in goes next.
fn notice_page(message: &str, next: &str) -> Response {
    let html = format!(
        "<!doctype html><meta charset=\"utf-8\"><title>Sign-in goes on</title><h1>Sign-in goes on</h1><p>{}</p><p><a id=\"next\" href=\"{}\">Continue</a></p>",
        escape(message),
        escape(next)
    );
    html_response(StatusCode::OK, html)
}

/// Text for HTML: nothing a client or the request chose can become markup.
fn escape(text: &str) -> String {
    text.chars()
        .map(|c| match c {
            '<' => "&lt;".to_owned(),
            '>' => "&gt;".to_owned(),
            '&' => "&amp;".to_owned(),
            '"' => "&quot;".to_owned(),
            '\'' => "&#39;".to_owned(),
            c => c.to_string(),
        })
        .collect()
}

/// A plain page for the person in the browser.
fn page(status: StatusCode, message: &str) -> Response {
    let html = format!(
        "<!doctype html><meta charset=\"utf-8\"><title>Sign-in failed</title><h1>Sign-in failed</h1><p>{}</p>",
        escape(message)
    );
    html_response(status, html)
}

/// The consent page: who asks, where the answer goes, what it may do; Allow or Deny. It
/// sets the cookie that binds the sign-in to this browser, and may not be framed.
fn consent_page(oauth: &OAuth, c: &crate::oauth::Consent) -> Response {
    let access =
        if c.read_only { "read your data on the forge" } else { "read and change your data on the forge" };
    let html = format!(
        "<!doctype html><meta charset=\"utf-8\"><title>Allow access?</title>\
         <h1>Allow access?</h1>\
         <p><strong>{client}</strong> (a name the client chose; this server has not verified it) asks to \
         {access} as you, through this MCP server.</p>\
         {forges}<p>If you allow it, you sign in on the forge next, and the answer goes to <code>{to}</code>.</p>\
         <p>Allow only if you started this from your own MCP client just now.</p>\
         <form method=\"post\" action=\"/authorize\">\
         <input type=\"hidden\" name=\"pending\" value=\"{pending}\">\
         <button type=\"submit\" name=\"granted\" value=\"true\">Allow</button> \
         <button type=\"submit\" name=\"granted\" value=\"false\">Deny</button>\
         </form>",
        client = escape(&c.client),
        to = escape(&c.redirect_to),
        pending = escape(&c.pending),
        forges = forges_list(&c.forges),
    );
    let mut r = html_response(StatusCode::OK, html);
    let (name, secure) = oauth.cookie();
    let cookie = format!(
        "{name}={}; Path=/; Max-Age=600; HttpOnly; SameSite=Lax{}",
        c.browser,
        if secure { "; Secure" } else { "" }
    );
    if let Ok(v) = HeaderValue::from_str(&cookie) {
        r.headers_mut().insert(header::SET_COOKIE, v);
    }
    r
}

/// With several forges, the ones the person signs in on, in order (nothing with one).
fn forges_list(forges: &[String]) -> String {
    if forges.is_empty() {
        return String::new();
    }
    let items: String = forges.iter().map(|f| format!("<li>{}</li>", escape(f))).collect();
    format!(
        "<p>You sign in on each of these forges in turn (a forge where you decline is left out):</p><ol>{items}</ol>"
    )
}

fn html_response(status: StatusCode, html: String) -> Response {
    let mut r = (status, [(header::CONTENT_TYPE, "text/html; charset=utf-8")], html).into_response();
    let h = r.headers_mut();
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static("default-src 'none'; frame-ancestors 'none'"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    r
}

fn error(e: &OAuthError) -> Response {
    let mut r = json(StatusCode::from_u16(e.status).unwrap_or(StatusCode::BAD_REQUEST), &e.body());
    if e.status == 401 {
        r.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    }
    r
}

fn json(status: StatusCode, body: &Value) -> Response {
    let mut r =
        (status, [(header::CONTENT_TYPE, "application/json")], Body::from(body.to_string())).into_response();
    r.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    cors(&mut r);
    r
}

fn cors(r: &mut Response) {
    r.headers_mut().insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, HeaderValue::from_static("*"));
}
