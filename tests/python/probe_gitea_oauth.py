#!/usr/bin/env python3
"""Probe a real Gitea's OAuth 2 provider with `forge_browser.py`, without the MCP server.

Run inside `scripts/real-gitea run VERSION -- ...`, which sets AEGIS_E2E_URL, AEGIS_E2E_TOKEN (alice's
API token) and AEGIS_E2E_LOGIN/AEGIS_E2E_PASSWORD (and _2 for bob):

    scripts/real-gitea run 1.27.3 -- .venv/bin/python tests/python/probe_gitea_oauth.py
    AEGIS_GITEA_INI=$'[oauth2]\\nINVALIDATE_REFRESH_TOKENS = true\\nACCESS_TOKEN_EXPIRATION_TIME = 120' \\
        scripts/real-gitea run 1.26.4 -- .venv/bin/python tests/python/probe_gitea_oauth.py \\
        --refresh-invalidation on --expires-in 120

It creates OAuth2 applications with alice's token, signs alice in on the web pages, answers the
consent page, exchanges codes at /login/oauth/access_token (with and without PKCE), calls the API
with the Bearer tokens, refreshes, and tries every kind of bad request. Each observation is printed
as one JSON line {"check": NAME, "ok": BOOL, "expected": ..., "observed": {...}}; token, code and
secret values are never printed (only their presence, length or JWT claim names). Exit status 0
when every expectation held, 1 when one did not (the failing lines have "ok": false), 2 on usage
errors or when the forge could not be driven at all.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import sys
import time
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx2
from forge_browser import ForgeBrowser, ForgeBrowserError, page_summary, jwt_claims, pkce_pair

R1 = "http://127.0.0.1:9/cb"
R2 = "http://127.0.0.1:9/cb2"
UNREGISTERED = "http://127.0.0.1:9/elsewhere"
SECRET_KEYS = ("access_token", "refresh_token", "id_token", "client_secret", "code")


def shape(body: Any) -> Any:
    """A JSON body with secret values replaced by a description of them."""
    if isinstance(body, dict):
        out = {}
        for k, v in body.items():
            if k in SECRET_KEYS and isinstance(v, str):
                claims = jwt_claims(v)
                out[k] = f"<{'JWT' if claims else 'str'} len={len(v)}>" if v else ""
            else:
                out[k] = shape(v)
        return out
    if isinstance(body, list):
        return [shape(x) for x in body]
    return body


class ProbeError(Exception):
    """The forge could not be driven far enough to observe anything (setup failed)."""


class Probe:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.url = os.environ["AEGIS_E2E_URL"].rstrip("/")
        self.api_token = os.environ["AEGIS_E2E_TOKEN"]
        self.alice = ForgeBrowser(os.environ["AEGIS_E2E_LOGIN"], os.environ["AEGIS_E2E_PASSWORD"])
        self.bob = ForgeBrowser(os.environ["AEGIS_E2E_LOGIN_2"], os.environ["AEGIS_E2E_PASSWORD_2"])
        self.failures = 0
        self.http = httpx2.AsyncClient(timeout=httpx2.Timeout(15.0), follow_redirects=False)
        self.forge = os.environ.get("AEGIS_E2E_FORGE", "")

    def report(self, check: str, ok: bool, expected: Any = None, **observed: Any) -> None:
        if not ok:
            self.failures += 1
        line = {"forge": self.forge, "check": check, "ok": ok}
        if expected is not None:
            line["expected"] = expected
        line["observed"] = observed
        print(json.dumps(line, sort_keys=False), flush=True)

    # --- helpers -------------------------------------------------------------------------------

    async def api(self, method: str, path: str, *, bearer: str | None = None, body: Any = None) -> httpx2.Response:
        auth = f"Bearer {bearer}" if bearer else f"token {self.api_token}"
        return await self.http.request(method, self.url + path, headers={"Authorization": auth}, json=body)

    async def new_app(self, name: str, *, confidential: bool = True, skip: bool | None = None) -> dict[str, Any]:
        payload: dict[str, Any] = {
            "name": f"{name}-{secrets.token_hex(3)}",
            "redirect_uris": [R1, R2],
            "confidential_client": confidential,
        }
        if skip is not None:
            payload["skip_secondary_authorization"] = skip
        r = await self.api("POST", "/api/v1/user/applications/oauth2", body=payload)
        if r.status_code != 201:
            raise ProbeError(f"creating an OAuth2 application answered {r.status_code}: {r.text[:300]}")
        return r.json()

    def authorize_url(
        self,
        app: dict[str, Any],
        *,
        scope: str | None = "read:repository read:user",
        pkce: str | None = "S256",
        redirect_uri: str = R1,
        extra: dict[str, str] | None = None,
    ) -> tuple[str, str | None, str]:
        """(authorize URL, code_verifier or None, state)."""
        state = secrets.token_urlsafe(12)
        q = {"client_id": app["client_id"], "redirect_uri": redirect_uri, "response_type": "code", "state": state}
        if scope is not None:
            q["scope"] = scope
        verifier = None
        if pkce == "S256":
            verifier, challenge = pkce_pair()
            q.update(code_challenge=challenge, code_challenge_method="S256")
        elif pkce == "plain":
            verifier = secrets.token_urlsafe(48)
            q.update(code_challenge=verifier, code_challenge_method="plain")
        elif pkce is not None:  # an unsupported method
            q.update(code_challenge=secrets.token_urlsafe(48), code_challenge_method=pkce)
        q.update(extra or {})
        return f"{self.url}/login/oauth/authorize?{urlencode(q)}", verifier, state

    async def dance(self, app: dict[str, Any], browser: ForgeBrowser | None = None, **kw: Any):
        url, verifier, state = self.authorize_url(app, **kw)
        res = await (browser or self.alice).authorize(url, kw.get("redirect_uri", R1))
        if res.state != state:
            raise ProbeError(f"the state came back as {res.state!r}, not as sent")
        return res, verifier

    async def token(
        self, data: dict[str, str], *, basic: tuple[str, str] | None = None
    ) -> tuple[int, Any, httpx2.Response]:
        r = await self.http.post(
            self.url + "/login/oauth/access_token",
            data=data,
            auth=httpx2.BasicAuth(*basic) if basic else None,
            headers={"Accept": "application/json"},
        )
        try:
            body = r.json()
        except ValueError:
            body = r.text[:300]
        return r.status_code, body, r

    def code_data(self, app: dict[str, Any], code: str, verifier: str | None, redirect_uri: str | None = R1) -> dict:
        d = {
            "grant_type": "authorization_code",
            "code": code,
            "client_id": app["client_id"],
            "client_secret": app["client_secret"],
        }
        if redirect_uri is not None:
            d["redirect_uri"] = redirect_uri
        if verifier is not None:
            d["code_verifier"] = verifier
        return d

    async def fresh_tokens(self, app: dict[str, Any], **kw: Any) -> dict[str, Any]:
        res, verifier = await self.dance(app, **kw)
        status, body, _ = await self.token(self.code_data(app, res.code, verifier))
        if status != 200:
            raise ProbeError(f"exchanging a fresh code answered {status}: {shape(body)}")
        return body

    async def access_summary(self, access: str) -> dict[str, Any]:
        """What the access token may do: statuses of a read of the user, a read of repositories and
        a harmless write (creating a repository with an empty name: 422 when allowed, 403 when
        the token's scope forbids it)."""
        user = await self.api("GET", "/api/v1/user", bearer=access)
        repos = await self.api("GET", "/api/v1/user/repos", bearer=access)
        write = await self.api("POST", "/api/v1/user/repos", bearer=access, body={"name": ""})
        # A repository write (PATCH of a missing repository): the scope is checked before the repository is looked up, so this is
        # 403 when the token may not write repositories and 404 when it may.
        repo_write = await self.api(
            "PATCH", f"/api/v1/repos/{self.alice.login}/no-such-repo", bearer=access, body={}
        )
        info = await self.http.get(self.url + "/login/oauth/userinfo", headers={"Authorization": f"Bearer {access}"})
        return {
            "GET /api/v1/user": [user.status_code, user.json().get("login") if user.status_code == 200 else user.text[:200]],
            "GET /api/v1/user/repos": [repos.status_code, None if repos.status_code == 200 else repos.text[:200]],
            "POST /api/v1/user/repos {name:''}": [write.status_code, write.text[:200]],
            "PATCH /api/v1/repos/alice/no-such-repo": [repo_write.status_code, repo_write.text[:200]],
            "GET /login/oauth/userinfo": [info.status_code, None if info.status_code == 200 else info.text[:200]],
        }

    async def raw_authorize(self, url: str, browser: ForgeBrowser | None) -> dict[str, Any]:
        """One GET of an authorize URL with the browser's cookies (or none): status, Location
        without its query's secrets, and what the page says."""
        async with httpx2.AsyncClient(
            timeout=httpx2.Timeout(15.0), follow_redirects=False, cookies=browser.cookies if browser else None
        ) as c:
            r = await c.get(url)
        out: dict[str, Any] = {"status": r.status_code, "content_type": r.headers.get("content-type")}
        if "location" in r.headers:
            out["location"] = r.headers["location"]
        else:
            out["page"] = page_summary(r)
        return out

    # --- the probes ----------------------------------------------------------------------------

    async def run(self) -> None:
        await self.metadata()
        await self.applications()
        scoped_app = await self.scopes()
        await self.grant_reuse(scoped_app)
        await self.pkce()
        await self.token_errors()
        await self.refresh()
        await self.authorize_errors()
        await self.consent_and_skip()
        await self.second_user(scoped_app)
        await self.wrong_password()

    async def metadata(self) -> None:
        out = {}
        for path in ("/.well-known/openid-configuration", "/.well-known/oauth-authorization-server"):
            r = await self.http.get(self.url + path)
            out[path] = {"status": r.status_code, "body": r.json() if r.status_code == 200 else r.text[:120]}
        oidc = out["/.well-known/openid-configuration"]
        self.report("metadata: well-known documents", oidc["status"] == 200, "openid-configuration 200", **out)

    async def applications(self) -> None:
        app = await self.new_app("fields")
        created_keys = sorted(app)
        r = await self.api("GET", "/api/v1/user/applications/oauth2")
        apps = r.json()
        mine = next((a for a in apps if a["client_id"] == app["client_id"]), {})
        one = await self.api("GET", f"/api/v1/user/applications/oauth2/{app['id']}")
        ok = (
            r.status_code == 200
            and mine.get("redirect_uris") == [R1, R2]
            and mine.get("client_secret") == ""
            and bool(app.get("client_secret"))
        )
        self.report(
            "applications: create (201) and list fields",
            ok,
            "list has redirect_uris, client_secret blanked; create returns the secret",
            create_keys=created_keys,
            created_secret_prefix=app["client_secret"][:4],
            list_status=r.status_code,
            list_count=len(apps),
            list_total_header=r.headers.get("x-total-count"),
            list_entry=shape(mine),
            get_one_status=one.status_code,
            get_one_secret_blank=(one.json().get("client_secret") == "") if one.status_code == 200 else None,
            other_apps=[a["name"] for a in apps if a["client_id"] != app["client_id"]],
        )

    async def scopes(self) -> dict[str, Any]:
        # write: POST /user/repos (needs write:user); repo: PATCH of a missing repository (needs
        # write:repository: 404 when allowed); user: GET /user (needs read:user).
        cases = [
            ("read:repository read:user", {"write": 403, "repo": 403, "user": 200}),
            (None, {"write": 422, "repo": 404, "user": 200}),
            ("", {"write": 422, "repo": 404, "user": 200}),
            ("openid", {"write": 422, "repo": 404, "user": 200}),
            ("openid profile email", {"write": 422, "repo": 404, "user": 200}),
            ("read:repository", {"write": 403, "repo": 403, "user": 403}),
            ("write:repository read:user", {"write": 403, "repo": 404, "user": 200}),
            ("read:repository read:user bogus:word", {"write": 422, "repo": 404, "user": 200}),
            ("frobnicate", {"write": 422, "repo": 404, "user": 200}),
            ("read:repository,read:user", {"write": 403, "repo": 403, "user": 200}),
            ("read:repository read:user public-only", {}),
            ("openid read:repository read:user", {"write": 403, "repo": 403, "user": 200}),
        ]
        first_app = None
        for scope, want in cases:
            app = await self.new_app("scope")
            first_app = first_app or app
            res, verifier = await self.dance(app, scope=scope)
            if res.code is None:
                self.report(f"scope {scope!r}", False, want, error=res.error, description=res.error_description)
                continue
            status, body, r = await self.token(self.code_data(app, res.code, verifier))
            access = body.get("access_token") if isinstance(body, dict) else None
            summary = await self.access_summary(access) if access else {}
            observed = {
                "write": summary.get("POST /api/v1/user/repos {name:''}", [None])[0],
                "repo": summary.get("PATCH /api/v1/repos/alice/no-such-repo", [None])[0],
                "user": summary.get("GET /api/v1/user", [None])[0],
            }
            ok = status == 200 and all(observed[k] == v for k, v in want.items())
            id_claims = jwt_claims(body.get("id_token", "")) if isinstance(body, dict) else None
            self.report(
                f"scope {scope!r}",
                ok,
                want or "recorded only",
                consent_shown=res.consent_shown,
                consent_fields=res.consent_fields,
                steps=res.steps,
                token_status=status,
                token_response=shape(body),
                token_content_type=r.headers.get("content-type"),
                id_token_claim_names=sorted(id_claims) if id_claims else None,
                **summary,
            )
        return first_app  # alice has granted it "read:repository read:user"

    async def grant_reuse(self, app: dict[str, Any]) -> None:
        # The app is confidential and alice has a grant with "read:repository read:user": a second
        # authorize, whatever scope it asks, is answered at once from the existing grant.
        res, verifier = await self.dance(app, scope="write:repository write:user")
        status, body, _ = await self.token(self.code_data(app, res.code, verifier))
        summary = await self.access_summary(body["access_token"]) if status == 200 else {}
        self.report(
            "confidential client with an existing grant, asking a wider scope",
            (not res.consent_shown) and summary.get("POST /api/v1/user/repos {name:''}", [0])[0] == 403,
            "no consent page; token keeps the first grant's scope (write refused)",
            steps=res.steps,
            consent_shown=res.consent_shown,
            token_status=status,
            **summary,
        )

    async def pkce(self) -> None:
        app = await self.new_app("pkce")
        # Confidential, no PKCE at all, in a fresh browser session.
        fresh_browser = ForgeBrowser(self.alice.login, self.alice.password)
        res, _ = await self.dance(app, browser=fresh_browser, pkce=None)
        s1, b1, _ = await self.token(self.code_data(app, res.code, None))
        self.report(
            "pkce: confidential client without PKCE (fresh session)",
            s1 == 200,
            200,
            authorize_error=res.error,
            token_status=s1,
            body=shape(b1) if s1 != 200 else None,
        )
        # The same in a session whose earlier authorize (another app) sent an S256 challenge: the
        # consent page's grant takes the challenge from the session, where the earlier one is left.
        stale = await self.new_app("pkce-stale")
        res, _ = await self.dance(stale, pkce=None)
        s1, b1, _ = await self.token(self.code_data(stale, res.code, None))
        self.report(
            "pkce: no PKCE after an S256 authorize in the same session (consent shown)",
            True,
            "recorded only",
            consent_shown=res.consent_shown,
            token_status=s1,
            body=shape(b1),
        )
        # A verifier sent although no challenge was: ignored.
        res, _ = await self.dance(app, pkce=None)
        s, b, _ = await self.token(self.code_data(app, res.code, "x" * 50))
        self.report("pkce: verifier sent for a code without challenge", s == 200, 200, token_status=s)
        # S256: missing, wrong, then right verifier on the same code.
        res, verifier = await self.dance(app, pkce="S256")
        s_missing, b_missing, _ = await self.token(self.code_data(app, res.code, None))
        s_wrong, b_wrong, _ = await self.token(self.code_data(app, res.code, "y" * 50))
        s_right, b_right, _ = await self.token(self.code_data(app, res.code, verifier))
        self.report(
            "pkce: S256 honored for a confidential client",
            s_missing == 400 and s_wrong == 400,
            "missing/wrong verifier refused",
            missing_verifier=[s_missing, shape(b_missing)],
            wrong_verifier=[s_wrong, shape(b_wrong)],
            right_verifier_after_failures=[s_right, shape(b_right) if s_right != 200 else "tokens"],
        )
        # plain
        res, verifier = await self.dance(app, pkce="plain")
        s, b, _ = await self.token(self.code_data(app, res.code, verifier))
        self.report("pkce: plain method accepted", s == 200, 200, token_status=s, body=shape(b) if s != 200 else None)
        # unsupported method
        url, _, state = self.authorize_url(app, pkce="S512")
        res = await self.alice.authorize(url, R1)
        self.report(
            "pkce: unsupported code_challenge_method",
            res.error == "invalid_request",
            "redirect with error=invalid_request",
            error=res.error,
            error_description=res.error_description,
            state_echoed=res.state == state,
            code=res.code is not None,
        )
        # Public client: PKCE required; no secret at the token endpoint.
        pub = await self.new_app("public", confidential=False)
        url, _, state = self.authorize_url(pub, pkce=None)
        res = await self.alice.authorize(url, R1)
        self.report(
            "pkce: public client without PKCE",
            res.error == "invalid_request",
            "redirect with error=invalid_request",
            error=res.error,
            error_description=res.error_description,
            consent_shown=res.consent_shown,
        )
        res, verifier = await self.dance(pub, pkce="S256")
        d = self.code_data(pub, res.code, verifier)
        del d["client_secret"]
        s, b, _ = await self.token(d)
        self.report(
            "pkce: public client exchange without secret",
            s == 200,
            200,
            token_status=s,
            body=shape(b),
            consent_shown=res.consent_shown,
        )

    async def token_errors(self) -> None:
        app = await self.new_app("errors")
        other = await self.new_app("errors-other")
        await self.dance(app)  # first grant (consent); later codes come without consent

        async def fresh(**kw: Any):
            res, verifier = await self.dance(app, **kw)
            return res.code, verifier

        results: dict[str, Any] = {}

        async def attempt(name: str, data: dict[str, str], basic: tuple[str, str] | None = None) -> None:
            status, body, r = await self.token(data, basic=basic)
            results[name] = {"status": status, "body": shape(body), "content_type": r.headers.get("content-type")}

        code, v = await fresh()
        await attempt("bad code", self.code_data(app, "gta_nonsense", v))
        await attempt("good code (after a bad one)", self.code_data(app, code, v))
        await attempt("reused code", self.code_data(app, code, v))
        code, v = await fresh()
        await attempt("unregistered redirect_uri", self.code_data(app, code, v, UNREGISTERED))
        await attempt("other registered redirect_uri", self.code_data(app, code, v, R2))
        await attempt("no redirect_uri", self.code_data(app, code, v, None))
        d = self.code_data(app, code, v)
        d["client_secret"] = "gto_wrong"
        await attempt("wrong client_secret", d)
        d = self.code_data(app, code, v)
        del d["client_secret"]
        await attempt("no client_secret", d)
        d = self.code_data(app, code, v)
        d["client_id"] = "00000000-0000-0000-0000-000000000000"
        await attempt("unknown client_id", d)
        d = self.code_data(other, code, v)
        await attempt("another app's credentials", d)
        d = self.code_data(app, code, v)
        del d["client_id"], d["client_secret"]
        await attempt("client_secret_basic (good)", d, basic=(app["client_id"], app["client_secret"]))
        code, v = await fresh(redirect_uri=R2)
        await attempt("code issued for R2, exchanged with R1", self.code_data(app, code, v, R1))
        await attempt("code issued for R2, exchanged with R2", self.code_data(app, code, v, R2))
        await attempt(
            "unsupported grant_type",
            {"grant_type": "client_credentials", "client_id": app["client_id"], "client_secret": app["client_secret"]},
        )
        code, v = await fresh()
        r = await self.http.post(self.url + "/login/oauth/access_token", json=self.code_data(app, code, v))
        results["JSON body instead of a form"] = {"status": r.status_code, "body": shape(r.json())}
        want = {
            "bad code": 400,
            "good code (after a bad one)": 200,
            "reused code": 400,
            "unregistered redirect_uri": 400,
            "other registered redirect_uri": 400,
            "no redirect_uri": 400,
            "wrong client_secret": 400,
            "no client_secret": 400,
            "unknown client_id": 400,
            "another app's credentials": 400,
            "client_secret_basic (good)": 200,
            "code issued for R2, exchanged with R1": 400,
            "code issued for R2, exchanged with R2": 200,
            "unsupported grant_type": 400,
        }
        for name, res in results.items():
            exp = want.get(name)
            self.report(f"token endpoint: {name}", exp is None or res["status"] == exp, exp, **res)

    async def refresh(self) -> None:
        app = await self.new_app("refresh")
        t1 = await self.fresh_tokens(app)
        a1, r1 = t1["access_token"], t1["refresh_token"]
        now = time.time()
        ca, cr = jwt_claims(a1) or {}, jwt_claims(r1) or {}
        self.report(
            "tokens: lifetimes",
            t1.get("expires_in") == self.args.expires_in,
            {"expires_in": self.args.expires_in},
            expires_in=t1.get("expires_in"),
            token_type=t1.get("token_type"),
            response_keys=sorted(t1),
            access_claims={k: (v if k not in ("exp", "iat", "nbf") else f"now{int(v - now):+d}s") for k, v in ca.items()},
            refresh_claims={k: (v if k not in ("exp", "iat", "nbf") else f"now{int(v - now):+d}s") for k, v in cr.items()},
            refresh_lifetime_hours=round((cr.get("exp", now) - now) / 3600, 1),
        )

        def rdata(token: str, *, secret: bool = True, client: dict | None = None) -> dict[str, str]:
            c = client or app
            d = {"grant_type": "refresh_token", "refresh_token": token, "client_id": c["client_id"]}
            if secret:
                d["client_secret"] = c["client_secret"]
            return d

        await asyncio.sleep(1.1)  # a JWT minted in the same second with the same claims is the same token
        s2, t2, _ = await self.token(rdata(r1))
        rotated = s2 == 200 and t2.get("refresh_token") != r1
        self.report(
            "refresh: first use",
            s2 == 200,
            200,
            status=s2,
            body=shape(t2),
            new_refresh_token_differs=rotated,
            new_access_token_differs=s2 == 200 and t2.get("access_token") != a1,
        )
        old_access = await self.api("GET", "/api/v1/user", bearer=a1)
        self.report(
            "refresh: the old access token after a refresh",
            old_access.status_code == 200,
            "still accepted until it expires (JWT, no revocation)",
            status=old_access.status_code,
        )
        s3, b3, _ = await self.token(rdata(r1))
        invalidating = self.args.refresh_invalidation == "on"
        self.report(
            "refresh: old refresh token reused",
            (s3 == 400) if invalidating else (s3 == 200),
            "400 (INVALIDATE_REFRESH_TOKENS=true)" if invalidating else "200 (Gitea default INVALIDATE_REFRESH_TOKENS=false)",
            status=s3,
            body=shape(b3),
        )
        if s2 == 200:
            s4, b4, _ = await self.token(rdata(t2["refresh_token"]))
            self.report(
                "refresh: newest refresh token after the old one was reused",
                True,
                "recorded only",
                status=s4,
                body=shape(b4),
            )
            latest = b4 if s4 == 200 else t2
        else:
            latest = t1
        s5, b5, _ = await self.token(rdata(latest["refresh_token"], secret=False))
        self.report("refresh: without client_secret", s5 == 400, 400, status=s5, body=shape(b5))
        other = await self.new_app("refresh-other")
        s6, b6, _ = await self.token(rdata(latest["refresh_token"], client=other))
        self.report("refresh: another app's credentials", s6 == 400, 400, status=s6, body=shape(b6))
        s7, b7, _ = await self.token(rdata("not-a-jwt"))
        self.report("refresh: garbage refresh token", s7 == 400, 400, status=s7, body=shape(b7))
        fresh = await self.fresh_tokens(app)
        s8, b8, _ = await self.token(rdata(fresh["access_token"]))
        self.report(
            "refresh: an access token presented as refresh_token",
            True,
            "recorded only",
            status=s8,
            body=shape(b8),
        )
        # Two sessions of the same person on the same app share one grant (and, with
        # INVALIDATE_REFRESH_TOKENS, one counter): a newer code exchange moves the counter.
        await asyncio.sleep(1.1)
        first = await self.fresh_tokens(app)
        await asyncio.sleep(1.1)
        await self.fresh_tokens(app)
        s10, b10, _ = await self.token(rdata(first["refresh_token"]))
        self.report(
            "refresh: an earlier session's refresh token after a newer code exchange (same grant)",
            (s10 == 400) if invalidating else (s10 == 200),
            "400 (counter moved)" if invalidating else 200,
            status=s10,
            body=shape(b10),
        )
        s9, b9, _ = await self.token(rdata((await self.fresh_tokens(app))["refresh_token"]) | {"scope": "read:user"})
        if s9 == 200:
            narrowed = await self.access_summary(b9["access_token"])
        else:
            narrowed = {}
        self.report(
            "refresh: with a scope parameter",
            True,
            "recorded only (Gitea has no scope on refresh)",
            status=s9,
            body=shape(b9),
            **narrowed,
        )

    async def authorize_errors(self) -> None:
        app = await self.new_app("authz-errors")
        good, _, _ = self.authorize_url(app)
        anon = await self.raw_authorize(good, None)
        self.report(
            "authorize: not signed in",
            anon["status"] in (302, 303) and "/user/login" in anon.get("location", ""),
            "redirect to /user/login",
            **anon,
        )
        # alice is signed in (her browser's cookies).
        unknown, _, _ = self.authorize_url({"client_id": "00000000-0000-0000-0000-000000000000"})
        res = await self.raw_authorize(unknown, self.alice)
        self.report("authorize: unknown client_id", res["status"] == 400, "400 page", **res)
        bad_redirect, _, _ = self.authorize_url(app, redirect_uri=UNREGISTERED)
        res = await self.raw_authorize(bad_redirect, self.alice)
        self.report("authorize: unregistered redirect_uri", res["status"] == 400, "400 page", **res)
        res = await self.raw_authorize(
            self.authorize_url(app, redirect_uri="HTTP://127.0.0.1:9/CB/")[0], self.alice
        )
        self.report("authorize: redirect_uri differing in case and trailing slash", True, "recorded only", **res)
        url, _, _ = self.authorize_url(app, extra={"response_type": "token"})
        res = await self.raw_authorize(url, self.alice)
        self.report("authorize: response_type=token", True, "recorded only", **res)
        url, _, _ = self.authorize_url(app)
        res = await self.raw_authorize(url.replace("response_type=code&", ""), self.alice)
        self.report("authorize: no response_type", True, "recorded only", **res)
        url, _, _ = self.authorize_url(app, extra={"resource": "http://127.0.0.1:1/mcp", "prompt": "consent"})
        res2 = await self.alice.authorize(url, R1)
        self.report(
            "authorize: resource and prompt parameters",
            res2.code is not None,
            "ignored",
            consent_shown=res2.consent_shown,
            error=res2.error,
        )
        # state is optional
        q = good.replace("state=", "x_state=")
        res3 = await self.alice.authorize(q, R1)
        self.report(
            "authorize: without state", True, "recorded only", code=res3.code is not None, state=res3.state, error=res3.error
        )

    async def consent_and_skip(self) -> None:
        pub = await self.new_app("public-noskip", confidential=False, skip=False)
        first, _ = await self.dance(pub)
        second, _ = await self.dance(pub)
        self.report(
            "public client: consent page on every authorize",
            first.consent_shown and second.consent_shown,
            "shown twice",
            first=first.consent_shown,
            second=second.consent_shown,
        )
        url, _, state = self.authorize_url(pub, scope="write:repository read:user")
        res = await self.alice.authorize(url, R1)
        self.report(
            "public client: existing grant, different scope",
            True,
            "recorded only",
            consent_shown=res.consent_shown,
            error=res.error,
            error_description=res.error_description,
            code=res.code is not None,
        )
        skip = await self.new_app("public-skip", confidential=False, skip=True)
        r = await self.api("GET", f"/api/v1/user/applications/oauth2/{skip['id']}")
        first, _ = await self.dance(skip)
        second, _ = await self.dance(skip)
        self.report(
            "skip_secondary_authorization on a public client",
            r.json().get("skip_secondary_authorization") is True and first.consent_shown and not second.consent_shown,
            "stored; consent only the first time",
            stored=r.json().get("skip_secondary_authorization"),
            first=first.consent_shown,
            second=second.consent_shown,
        )
        conf = await self.new_app("confidential-skip", confidential=True, skip=True)
        first, _ = await self.dance(conf)
        self.report(
            "skip_secondary_authorization does not skip the first consent",
            first.consent_shown,
            "consent shown once",
            first=first.consent_shown,
        )
        deny = await self.new_app("deny", confidential=False)
        url, _, state = self.authorize_url(deny)
        res = await self.alice.authorize(url, R1, grant=False)
        self.report(
            "consent denied",
            res.error == "access_denied" and res.state == state,
            "redirect error=access_denied with state",
            error=res.error,
            error_description=res.error_description,
            state_echoed=res.state == state,
            location_query_keys=sorted(parse_qs(urlsplit(res.location).query)),
        )

    async def second_user(self, app: dict[str, Any]) -> None:
        res, verifier = await self.dance(app, browser=self.bob)
        status, body, _ = await self.token(self.code_data(app, res.code, verifier))
        who = await self.api("GET", "/api/v1/user", bearer=body.get("access_token")) if status == 200 else None
        self.report(
            "second user on the same app",
            who is not None and who.json().get("login") == self.bob.login and res.consent_shown,
            "own consent; token is bob's",
            consent_shown=res.consent_shown,
            login=who.json().get("login") if who is not None else None,
        )

    async def wrong_password(self) -> None:
        app = await self.new_app("wrong-password")
        url, _, _ = self.authorize_url(app)
        browser = ForgeBrowser(self.alice.login, "not-the-password")
        try:
            await browser.authorize(url, R1)
        except ForgeBrowserError as e:
            self.report("browser: wrong password", "login page came back" in str(e), "ForgeBrowserError", message=str(e))
            return
        self.report("browser: wrong password", False, "ForgeBrowserError", message="signed in?!")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--refresh-invalidation",
        choices=["on", "off"],
        default="off",
        help="whether the instance runs with [oauth2] INVALIDATE_REFRESH_TOKENS = true (default: off, Gitea's default)",
    )
    parser.add_argument("--expires-in", type=int, default=3600, help="expected access token expires_in (default 3600)")
    args = parser.parse_args()
    for name in ("AEGIS_E2E_URL", "AEGIS_E2E_TOKEN", "AEGIS_E2E_LOGIN", "AEGIS_E2E_PASSWORD", "AEGIS_E2E_LOGIN_2"):
        if not os.environ.get(name):
            parser.error(f"{name} is not set: run this inside scripts/real-gitea run VERSION -- ...")

    async def go() -> int:
        probe = Probe(args)
        try:
            await probe.run()
        finally:
            await probe.http.aclose()
        return probe.failures

    try:
        failures = asyncio.run(go())
    except (ForgeBrowserError, ProbeError) as e:
        print(f"probe_gitea_oauth: the forge could not be driven: {e}", file=sys.stderr)
        return 2
    print(json.dumps({"summary": "done", "failures": failures}))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
