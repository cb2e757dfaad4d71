"""The playground page: three fixed files from the package, nothing else served."""

from __future__ import annotations

from importlib import resources

from fastapi import FastAPI
from fastapi.responses import Response

_STATIC = {
    "index.html": "text/html; charset=utf-8",
    "app.js": "text/javascript; charset=utf-8",
    "style.css": "text/css; charset=utf-8",
}
_PAGE_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "media-src 'self' blob:; connect-src 'self'; object-src 'none'; base-uri 'none'; "
    "frame-ancestors 'none'"
)


def add_playground_routes(app: FastAPI) -> None:
    def page(name: str) -> Response:
        data = resources.files("yomiage.server").joinpath("static").joinpath(name).read_bytes()
        headers = {"Cache-Control": "no-cache"}
        if name == "index.html":
            headers["Content-Security-Policy"] = _PAGE_POLICY
        return Response(data, media_type=_STATIC[name], headers=headers)

    @app.get("/", include_in_schema=False)
    async def index() -> Response:
        return page("index.html")

    @app.get("/playground/app.js", include_in_schema=False)
    async def script() -> Response:
        return page("app.js")

    @app.get("/playground/style.css", include_in_schema=False)
    async def style() -> Response:
        return page("style.css")
