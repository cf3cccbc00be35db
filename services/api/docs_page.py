"""``/docs``: Swagger UI served by the API itself, so that the page works without the internet.

FastAPI's own ``/docs`` loads Swagger UI's script and style from a CDN: offline, or behind a
firewall, the page is blank. Here they come from the ``swagger-ui-py`` package installed with the
project (its ``swagger_ui/static`` folder, Swagger UI 5, which reads the OpenAPI 3.1 document
FastAPI writes), mounted under ``/docs/assets``.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

DOCS_PATH = "/docs"
ASSETS_PATH = "/docs/assets"


def swagger_ui_folder() -> Path:
    """The folder of Swagger UI's files in the installed ``swagger-ui-py`` (found without importing it)."""
    found = importlib.util.find_spec("swagger_ui")
    if found is None or not found.submodule_search_locations:
        raise RuntimeError("the swagger-ui-py package is not installed (pip install 'lecritique[api]')")
    folder = Path(next(iter(found.submodule_search_locations))) / "static"
    if not (folder / "swagger-ui-bundle.js").is_file():
        raise RuntimeError(f"swagger-ui-py has no swagger-ui-bundle.js under {folder}")
    return folder


def install_docs(app: FastAPI) -> None:
    """Mount the assets and the ``/docs`` page (the application is made with ``docs_url=None``)."""
    app.mount(ASSETS_PATH, StaticFiles(directory=swagger_ui_folder()), name="swagger-ui-assets")

    @app.get(DOCS_PATH, include_in_schema=False)
    def docs(request: Request) -> HTMLResponse:
        root = str(request.scope.get("root_path", "")).rstrip("/")
        return get_swagger_ui_html(
            openapi_url=f"{root}{app.openapi_url}",
            title=f"{app.title} API",
            swagger_js_url=f"{root}{ASSETS_PATH}/swagger-ui-bundle.js",
            swagger_css_url=f"{root}{ASSETS_PATH}/swagger-ui.css",
            swagger_favicon_url=f"{root}{ASSETS_PATH}/favicon-32x32.png",
        )
