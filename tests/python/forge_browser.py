"""A headless "browser" that signs a person in on a Gitea (or Forgejo) web page and answers its
OAuth 2 consent page, so that an authorization-code flow can be driven without a person.

    browser = ForgeBrowser(login="alice", password="...")
    result = await browser.authorize(authorize_url, redirect_uri="http://127.0.0.1:9/cb")
    result.code, result.state, result.error, result.steps

`authorize` GETs the URL and then steps through the answers itself (redirect following is off;
every 30x is one step): a redirect to `redirect_uri` (same scheme, host, port and path; any
query) ends the walk and its `code`, `state`, `iss`, `error` and `error_description` are
returned; any other redirect is followed (301/302/303 as a GET, 307/308 repeating the method and
body); a page with a password form is the login page: its hidden inputs (`_csrf` on forges that
have one; Gitea 1.26 and 1.27 have none and check the `Sec-Fetch-Site`/`Origin` headers instead,
which a non-browser client does not send) are posted back with `user_name` and `password`; a page
with a form posting to `.../login/oauth/grant`, or with a `granted` button (the MCP server's own
consent page, which comes first), is a consent page: its hidden inputs (`client_id`,
`state`, `scope`, `nonce`, `redirect_uri`, and `_csrf` where there is one) are posted back with
`granted=true` (or `false` when `grant=False`). The walk may pass through other servers (e.g. an
MCP server's `/authorize` and its `/oauth/callback`): one cookie jar serves all of them, as in a
browser (cookies do not depend on the port).

Bounded: at most `max_steps` requests, each with `timeout` seconds. Anything else (an error
status, a page that is neither login nor consent, the login page again after signing in, too many
steps) raises `ForgeBrowserError`, whose message names the step, the request and the status, with
the page's error text when it shows one. Passwords, codes and tokens are never put in a message.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import secrets
from dataclasses import dataclass, field
from html.parser import HTMLParser
from urllib.parse import parse_qs, urljoin, urlsplit

import httpx2

REDIRECT_STATUSES = (301, 302, 303, 307, 308)


class ForgeBrowserError(Exception):
    """The walk stopped: the message names the step, the request, the status and what the page said."""


@dataclass
class Form:
    action: str | None
    method: str
    inputs: list[tuple[str, str, str]] = field(default_factory=list)  # (type, name, value)
    buttons: list[tuple[str, str, str]] = field(default_factory=list)  # (type, name, value)

    def hidden(self) -> dict[str, str]:
        return {name: value for kind, name, value in self.inputs if kind == "hidden" and name}

    def has_password(self) -> bool:
        return any(kind == "password" for kind, _, _ in self.inputs)

    def field_names(self) -> list[str]:
        return [name for _, name, _ in self.inputs if name] + [name for _, name, _ in self.buttons if name]


class _PageParser(HTMLParser):
    """The forms of a page (inputs and buttons), its title and the text of its error messages."""

    _ERROR_CLASSES = ("negative", "flash-error", "error-message")

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.forms: list[Form] = []
        self.title = ""
        self.errors: list[str] = []
        self._form: Form | None = None
        self._in_title = False
        self._error_depth = 0  # >0 while inside an element whose class marks an error message
        self._depth = 0
        self._error_text: list[str] = []
        self._headline: list[str] = []  # h1/h3 text (Gitea's grant_error page says what failed there)
        self._in_headline = False
        self.headlines: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: (v or "") for k, v in attrs}
        if tag not in ("input", "br", "img", "meta", "link", "hr"):
            self._depth += 1
            classes = a.get("class", "").split()
            hidden = "hidden" in a or "tw-hidden" in classes or "hidden" in classes
            if self._error_depth == 0 and not hidden and any(c in classes for c in self._ERROR_CLASSES):
                self._error_depth = self._depth
                self._error_text = []
        if tag == "form":
            self._form = Form(action=a.get("action"), method=(a.get("method") or "get").upper())
            self.forms.append(self._form)
        elif tag == "input" and self._form is not None:
            self._form.inputs.append(((a.get("type") or "text").lower(), a.get("name", ""), a.get("value", "")))
        elif tag == "button" and self._form is not None:
            self._form.buttons.append(((a.get("type") or "submit").lower(), a.get("name", ""), a.get("value", "")))
        elif tag == "title":
            self._in_title = True
        elif tag in ("h1", "h2", "h3"):
            self._in_headline = True
            self._headline = []

    def handle_endtag(self, tag: str) -> None:
        if tag == "form":
            self._form = None
        elif tag == "title":
            self._in_title = False
        elif tag in ("h1", "h2", "h3") and self._in_headline:
            self._in_headline = False
            text = " ".join("".join(self._headline).split())
            if text:
                self.headlines.append(text)
        if tag not in ("input", "br", "img", "meta", "link", "hr"):
            if self._error_depth and self._depth == self._error_depth:
                text = " ".join("".join(self._error_text).split())
                if text:
                    self.errors.append(text)
                self._error_depth = 0
            self._depth -= 1

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.title += data
        if self._error_depth:
            self._error_text.append(data)
        if self._in_headline:
            self._headline.append(data)


def parse_page(html: str) -> _PageParser:
    parser = _PageParser()
    parser.feed(html)
    parser.close()
    return parser


@dataclass
class AuthorizationResponse:
    """The redirect to the client's redirect_uri that ended the walk."""

    location: str
    code: str | None
    state: str | None
    iss: str | None
    error: str | None
    error_description: str | None
    steps: list[str]  # "METHOD scheme://host/path -> STATUS" per request (no query strings)
    consent_shown: bool
    signed_in: bool
    consent_fields: list[str]  # the field names of the consent form, when one was shown


def _same_endpoint(url: str, target: str) -> bool:
    a, b = urlsplit(url), urlsplit(target)
    return (a.scheme, a.hostname, a.port, a.path or "/") == (b.scheme, b.hostname, b.port, b.path or "/")


def _bare(url: str) -> str:
    """The URL without its query and fragment (which may carry state, codes or challenges)."""
    p = urlsplit(url)
    return f"{p.scheme}://{p.netloc}{p.path}"


def page_summary(resp: httpx2.Response) -> str:
    ctype = resp.headers.get("content-type", "")
    text = resp.text
    if "html" in ctype:
        page = parse_page(text)
        parts = page.errors or page.headlines[:2] or ([page.title.strip()] if page.title.strip() else [])
        return "; ".join(parts)[:300] or "(an HTML page without an error message)"
    return " ".join(text.split())[:300] or "(empty body)"


class ForgeBrowser:
    def __init__(
        self,
        login: str,
        password: str,
        *,
        max_steps: int = 20,
        timeout: float = 15.0,
        user_agent: str = "aegis-forge-browser/1",
    ) -> None:
        self.login = login
        self.password = password
        self.max_steps = max_steps
        self.timeout = timeout
        self.user_agent = user_agent
        # One jar for the whole walk, and kept between walks (a second authorize finds the
        # person signed in, as a browser would).
        self.cookies = httpx2.Cookies()

    async def authorize(self, url: str, redirect_uri: str, *, grant: bool = True) -> AuthorizationResponse:
        async with httpx2.AsyncClient(
            follow_redirects=False,
            timeout=httpx2.Timeout(self.timeout),
            cookies=self.cookies,
            headers={"User-Agent": self.user_agent, "Accept": "text/html,application/json;q=0.9,*/*;q=0.8"},
        ) as client:
            try:
                return await self._walk(client, url, redirect_uri, grant)
            finally:
                # Kept for the next walk (a second authorize finds the person signed in).
                self.cookies = httpx2.Cookies(client.cookies)

    async def _walk(
        self, client: httpx2.AsyncClient, url: str, redirect_uri: str, grant: bool
    ) -> AuthorizationResponse:
        steps: list[str] = []
        signed_in = False
        consent_shown = False
        consent_fields: list[str] = []
        answered: set[str] = set()
        method, target, data = "GET", url, None
        for step in range(1, self.max_steps + 1):
            where = f"step {step}: {method} {_bare(target)}"
            try:
                resp = await client.request(method, target, data=data)
            except httpx2.HTTPError as e:
                raise ForgeBrowserError(f"{where}: request failed: {type(e).__name__}: {e}") from e
            steps.append(f"{method} {_bare(target)} -> {resp.status_code}")

            if resp.status_code in REDIRECT_STATUSES:
                location = resp.headers.get("location")
                if not location:
                    raise ForgeBrowserError(f"{where}: {resp.status_code} without a Location header")
                nxt = urljoin(str(resp.url), location)
                if _same_endpoint(nxt, redirect_uri):
                    q = parse_qs(urlsplit(nxt).query)

                    def one(name: str) -> str | None:
                        v = q.get(name)
                        return v[0] if v else None

                    return AuthorizationResponse(
                        location=nxt,
                        code=one("code"),
                        state=one("state"),
                        iss=one("iss"),
                        error=one("error"),
                        error_description=one("error_description"),
                        steps=steps,
                        consent_shown=consent_shown,
                        signed_in=signed_in,
                        consent_fields=consent_fields,
                    )
                if resp.status_code in (307, 308):
                    target = nxt  # same method and body
                else:
                    method, target, data = "GET", nxt, None
                continue

            if resp.status_code != 200:
                raise ForgeBrowserError(
                    f"{where}: answered {resp.status_code}: {page_summary(resp)} (steps: {' | '.join(steps)})"
                )
            if "html" not in resp.headers.get("content-type", ""):
                raise ForgeBrowserError(
                    f"{where}: answered 200 {resp.headers.get('content-type', '')!r}, not a page: "
                    f"{page_summary(resp)} (steps: {' | '.join(steps)})"
                )
            page = parse_page(resp.text)
            login_form = next((f for f in page.forms if f.has_password()), None)
            consent_form = next(
                (
                    f
                    for f in page.forms
                    if (f.action or "").rstrip("/").endswith("/login/oauth/grant")
                    or any(name == "granted" for _, name, _ in f.buttons)
                ),
                None,
            )
            if login_form is not None:
                if signed_in:
                    raise ForgeBrowserError(
                        f"{where}: the login page came back after signing in as {self.login!r}: "
                        f"{'; '.join(page.errors) or 'no error shown'}"
                    )
                fields = login_form.hidden()
                names = [n for _, n, _ in login_form.inputs]
                user_field = next((n for n in ("user_name", "username", "login", "email") if n in names), None)
                pass_field = next(n for k, n, _ in login_form.inputs if k == "password" and n)
                if user_field is None:
                    raise ForgeBrowserError(f"{where}: a login form without a user name field ({names})")
                fields[user_field] = self.login
                fields[pass_field] = self.password
                method, target, data = login_form.method, urljoin(str(resp.url), login_form.action or ""), fields
                signed_in = True
                continue
            if consent_form is not None:
                # Two consent pages may come in turn (the MCP server's own, then the forge's);
                # the same one twice means the answer was not taken.
                target = urljoin(str(resp.url), consent_form.action or "")
                if _bare(target) in answered:
                    raise ForgeBrowserError(f"{where}: the consent page came back after answering it")
                answered.add(_bare(target))
                consent_shown = True
                consent_fields += consent_form.field_names()
                fields = consent_form.hidden()
                fields["granted"] = "true" if grant else "false"
                method = consent_form.method
                data = fields
                continue
            raise ForgeBrowserError(
                f"{where}: answered 200 with a page that is neither a login nor a consent page "
                f"(title {page.title.strip()!r}): {page_summary(resp)} (steps: {' | '.join(steps)})"
            )
        raise ForgeBrowserError(
            f"no redirect to {_bare(redirect_uri)} within {self.max_steps} steps (steps: {' | '.join(steps)})"
        )


def pkce_pair() -> tuple[str, str]:
    """A fresh (code_verifier, S256 code_challenge)."""
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).decode().rstrip("=")
    return verifier, challenge


_JWT = re.compile(r"^[A-Za-z0-9_-]+\.([A-Za-z0-9_-]+)\.[A-Za-z0-9_-]+$")


def jwt_claims(token: str) -> dict | None:
    """The (unverified) claims of a JWT, or None when `token` is not one."""
    m = _JWT.match(token or "")
    if not m:
        return None
    payload = m.group(1)
    try:
        return json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    except ValueError:
        return None
